//! Several servers in one process sharing an `InMemoryCluster` (issue 14): a change raised on
//! one replica reaches the listeners of another, once, and never travels back; the replicas
//! share one key ring, so a cursor one signs pages on another; rotation reaches every replica;
//! a 2026-07-28 retry sent to several replicas runs its handler once (the shared replay ledger).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcp_proto::interaction::InputRequest;
use mcp_proto::{AskError, Caller, HandlerError, Resource, ResourceContents, Tool, ToolOutput};
use mcp_server::{Cluster, InMemoryCluster, Server, ServerBuilder, ToolCall};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const WATCHED: &str = "test://watched";

fn replica(cluster: &Arc<InMemoryCluster>, name: &str) -> ServerBuilder {
    let mut b = Server::builder("cluster-test", "1")
        .resource_subscriptions()
        .resource(Resource::new(WATCHED, "watched"), |_| async {
            Ok(vec![ResourceContents::text(WATCHED, "text/plain", "v")])
        });
    for i in 0..5 {
        b = b.tool(Tool::new(format!("t{i}"), "d", json!({"type": "object"})), |_: ToolCall| async {
            Ok::<_, mcp_proto::HandlerError>(ToolOutput::text("ok"))
        });
    }
    b.config_mut().limits.page_size(2);
    b.cluster(cluster.clone() as Arc<dyn Cluster>, name)
}

/// A line client of `server`: what it writes, and the lines it reads.
struct Client {
    to: tokio::io::DuplexStream,
    from: tokio::io::Lines<BufReader<tokio::io::DuplexStream>>,
}

impl Client {
    fn connect(server: &Server) -> Self {
        let (client_in, server_out) = tokio::io::duplex(1 << 16);
        let (server_in, client_out) = tokio::io::duplex(1 << 16);
        let server = server.clone();
        tokio::spawn(async move {
            let _ = mcp_tokio::serve_lines(&server, Caller::identified("alice"), server_in, server_out).await;
        });
        Self { to: client_out, from: BufReader::new(client_in).lines() }
    }

    async fn send(&mut self, v: Value) {
        let mut line = v.to_string();
        line.push('\n');
        self.to.write_all(line.as_bytes()).await.unwrap();
    }

    /// The next line, or `None` after `wait`.
    async fn next(&mut self, wait: Duration) -> Option<Value> {
        let line = tokio::time::timeout(wait, self.from.next_line()).await.ok()?.ok()??;
        Some(serde_json::from_str(&line).unwrap())
    }

    async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        loop {
            let v = self.next(Duration::from_secs(10)).await.expect("an answer");
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
        }
    }

    async fn initialized(server: &Server) -> Self {
        let mut c = Self::connect(server);
        c.request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"}}),
        )
        .await;
        c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        c
    }

    /// Notifications (method names) read within `wait`.
    async fn notes(&mut self, wait: Duration) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(v) = self.next(wait).await {
            if let Some(m) = v.get("method").and_then(Value::as_str) {
                out.push(m.to_owned());
            }
        }
        out
    }
}

#[tokio::test]
async fn a_change_on_one_replica_reaches_the_listeners_of_another_once() {
    let cluster = Arc::new(InMemoryCluster::default());
    let a = replica(&cluster, "a").join().await.unwrap();
    let b = replica(&cluster, "b").join().await.unwrap();
    let mut on_a = Client::initialized(&a).await;
    let mut on_b = Client::initialized(&b).await;
    let sub = on_a.request(1, "resources/subscribe", json!({"uri": WATCHED})).await;
    assert!(sub.get("result").is_some(), "{sub}");

    b.add_tool(Tool::new("dynamic", "d", json!({"type": "object"})), |_: ToolCall| async {
        Ok::<_, mcp_proto::HandlerError>(ToolOutput::text("ok"))
    })
    .unwrap();
    b.notify_resource_updated(WATCHED);

    let seen_a = on_a.notes(Duration::from_millis(500)).await;
    assert_eq!(
        seen_a,
        ["notifications/tools/list_changed", "notifications/resources/updated"],
        "replica a's listener hears of b's changes, once each"
    );
    // b's own client hears of its own tool once: the event that comes back is not applied again.
    let seen_b = on_b.notes(Duration::from_millis(500)).await;
    assert_eq!(seen_b, ["notifications/tools/list_changed"]);
    assert_eq!(cluster.dropped(), 0);
    assert_eq!(a.replica().as_deref(), Some("a"));
    assert!(matches!(a.status().cluster, mcp_server::ClusterHealth::Connected));
}

#[tokio::test]
async fn a_cursor_signed_on_one_replica_pages_on_another_across_a_rotation() {
    let cluster = Arc::new(InMemoryCluster::default());
    let a = replica(&cluster, "a").join().await.unwrap();
    let b = replica(&cluster, "b").join().await.unwrap();
    let mut on_a = Client::initialized(&a).await;
    let mut on_b = Client::initialized(&b).await;

    let cursor_of = |v: &Value| v["result"]["nextCursor"].as_str().map(str::to_owned);
    let first = on_a.request(1, "tools/list", json!({})).await;
    let cursor = cursor_of(&first).expect("a first page with a cursor");
    let second = on_b.request(1, "tools/list", json!({"cursor": cursor})).await;
    assert_eq!(second["result"]["tools"][0]["name"], "t2", "{second}");

    // a rotates, keeping the old key: b hears of it, and the old cursor still pages on both.
    a.rotate_cluster_keys(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let again = on_b.request(2, "tools/list", json!({"cursor": cursor})).await;
    assert_eq!(again["result"]["tools"][0]["name"], "t2", "{again}");
    // A cursor signed with the new key on b verifies on a.
    let fresh = cursor_of(&on_b.request(3, "tools/list", json!({})).await).unwrap();
    let on_a_page = on_a.request(2, "tools/list", json!({"cursor": fresh})).await;
    assert_eq!(on_a_page["result"]["tools"][0]["name"], "t2", "{on_a_page}");

    // Rotated again without keeping: the first cursor is refused everywhere.
    b.rotate_cluster_keys(0).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = on_a.request(3, "tools/list", json!({"cursor": cursor})).await;
    assert!(refused.get("error").is_some(), "{refused}");
}

/// A `redis-server` on a free loopback port, stopped on drop.
struct Redis {
    child: std::process::Child,
    port: u16,
}

impl Redis {
    /// `None` (and a message saying so) when the binary is not installed.
    fn start_on(port: u16) -> Option<Self> {
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!("SKIPPED: redis-server is not installed (apt-get install redis-server)");
                return None;
            }
            Err(e) => panic!("cannot start redis-server: {e}"),
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "redis-server did not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(Self { child, port })
    }

    fn start() -> Option<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        Self::start_on(port)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn redis_replica(url: &str, name: &str) -> ServerBuilder {
    let cluster = Arc::new(mcp_server::RedisCluster::new(url, "test").unwrap());
    let in_memory = Arc::new(InMemoryCluster::default());
    replica(&in_memory, name).cluster(cluster as Arc<dyn Cluster>, name)
}

/// Waits up to 10 s for `f` to hold.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_redis_share_changes_keys_and_tasks_and_ride_out_an_outage() {
    let Some(redis) = Redis::start() else { return };
    let url = redis.url();
    let a = redis_replica(&url, "a").join().await.unwrap();
    let b = redis_replica(&url, "b").join().await.unwrap();
    let mut on_a = Client::initialized(&a).await;
    let mut on_b = Client::initialized(&b).await;
    assert!(on_a.request(1, "resources/subscribe", json!({"uri": WATCHED})).await.get("result").is_some());
    until("both replicas subscribed", || {
        a.status().cluster == mcp_server::ClusterHealth::Connected
            && b.status().cluster == mcp_server::ClusterHealth::Connected
    })
    .await;
    // The SUBSCRIBE may still be in flight when health first reads Connected.
    tokio::time::sleep(Duration::from_millis(200)).await;

    // One key ring: a's cursor pages on b.
    let first = on_a.request(2, "tools/list", json!({})).await;
    let cursor = first["result"]["nextCursor"].as_str().unwrap().to_owned();
    let second = on_b.request(2, "tools/list", json!({"cursor": cursor})).await;
    assert_eq!(second["result"]["tools"][0]["name"], "t2", "{second}");

    // A change on b reaches a's listener once.
    b.notify_resource_updated(WATCHED);
    assert_eq!(on_a.notes(Duration::from_millis(700)).await, ["notifications/resources/updated"]);

    // Tasks: what b stores, a reads.
    let store_b = mcp_server::RedisCluster::new(&url, "test").unwrap();
    let store_a = mcp_server::RedisCluster::new(&url, "test").unwrap();
    let record = mcp_proto::TaskRecord {
        task_id: "task-1".into(),
        owner: "alice".into(),
        task: serde_json::Map::from_iter([("status".to_owned(), json!("completed"))]),
        ended_unix_ms: 1,
        ttl_ms: 60_000,
    };
    mcp_server::TaskStore::put(&store_b, record.clone()).await.unwrap();
    let got = mcp_server::TaskStore::get(&store_a, "alice".into(), "task-1".into()).await.unwrap();
    assert_eq!(got, Some(record));
    assert_eq!(mcp_server::TaskStore::get(&store_a, "bob".into(), "task-1".into()).await.unwrap(), None);

    // One continuation epoch: a moves it on (INCR), b hears of it, and a replica joining now
    // starts in it.
    assert_eq!((a.epoch(), b.epoch()), (0, 0));
    assert_eq!(a.move_epoch().await.unwrap(), 1);
    until("b in epoch 1", || b.epoch() == 1).await;
    let c = redis_replica(&url, "c").join().await.unwrap();
    assert_eq!(c.epoch(), 1, "a joining replica takes the cluster's epoch");

    // Redis goes away: b serves on, reports degraded, and keeps the change it raises.
    let port = redis.port;
    drop(redis);
    b.notify_resource_updated(WATCHED);
    until(
        "b degraded, the change queued",
        || matches!(b.status().cluster, mcp_server::ClusterHealth::Degraded { queued } if queued >= 1),
    )
    .await;
    assert_eq!(on_b.request(9, "ping", json!({})).await["result"], json!({}), "b still serves");
    assert_eq!(on_a.notes(Duration::from_millis(300)).await, Vec::<String>::new());

    // Back on the same port: b publishes what waited (it reads Connected only once its queue
    // is drained), a re-subscribes and re-lists.
    let _redis = Redis::start_on(port).unwrap();
    until("b connected again, its queue published", || {
        b.status().cluster == mcp_server::ClusterHealth::Connected
    })
    .await;
    until("a connected again", || a.status().cluster == mcp_server::ClusterHealth::Connected).await;
    let mut seen = on_a.notes(Duration::from_millis(1500)).await;
    seen.sort();
    seen.dedup();
    assert!(seen.contains(&"notifications/tools/list_changed".to_owned()), "{seen:?}");
    // The update b raised while Redis was down arrives once a has subscribed again, unless
    // b published it before a was back (pub/sub keeps nothing): b retries until it can
    // publish, and a subscribes within its backoff, so send one more change and expect it.
    b.notify_resource_updated(WATCHED);
    let after = on_a.notes(Duration::from_millis(700)).await;
    assert!(after.contains(&"notifications/resources/updated".to_owned()), "{after:?}");
}

// ---------------------------------------------------------------------------------------------
// The shared replay ledger
// ---------------------------------------------------------------------------------------------

/// A tool that asks for a confirmation (2026-07-28: `input_required`, then a retry carrying the
/// state) and counts the runs that got past the question: the side effect a copy of the retry
/// must not repeat.
fn charging(b: ServerBuilder, runs: Arc<AtomicUsize>) -> ServerBuilder {
    b.tool(Tool::new("charge", "Charges once confirmed", json!({"type": "object"})), move |call: ToolCall| {
        let runs = runs.clone();
        async move {
            let form = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
            let confirm =
                InputRequest::elicit("Charge?", form).map_err(|e| HandlerError::private(e.to_string()))?;
            match call.ctx.ask_one("confirm", confirm).await {
                Ok(_) => {}
                Err(AskError::Suspended) => return Err(HandlerError::Cancelled),
                Err(e) => return Err(e.into()),
            }
            let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
            Ok::<_, HandlerError>(ToolOutput::text(format!("charged (run {n})")))
        }
    })
}

fn modern_call(extra: Value) -> Value {
    let mut params = json!({"name": "charge", "arguments": {"amount": 5},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}});
    if let (Some(p), Value::Object(extra)) = (params.as_object_mut(), extra) {
        p.extend(extra);
    }
    params
}

/// Round 1 on `a`, then the same retry on `b`, `a`, `b`: every answer is the same, and the
/// handler ran to completion once over the replicas.
async fn a_retry_runs_once_over(a: &Server, b: &Server, runs: &AtomicUsize) {
    let mut on_a = Client::connect(a);
    let mut on_b = Client::connect(b);
    let first = on_a.request(1, "tools/call", modern_call(json!({}))).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().expect("a state").to_owned();
    let retry = modern_call(json!({"requestState": state,
        "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}}}));
    let mut answers = Vec::new();
    for name in ["b", "a", "b", "a"] {
        let client = if name == "a" { &mut on_a } else { &mut on_b };
        // A copy that reaches a replica before the first one's outcome is recorded (the record
        // travels to the backend beside the answer) is refused `in_progress`: sent again, as
        // the error says.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let answer = loop {
            let answer = client.request(2, "tools/call", retry.clone()).await;
            if answer["error"]["data"]["reason"] != "in_progress" || tokio::time::Instant::now() > deadline {
                break answer;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        answers.push((name, answer));
    }
    let (_, expected) = &answers[0];
    assert_eq!(expected["result"]["content"][0]["text"], "charged (run 1)", "{expected}");
    for (name, answer) in &answers {
        assert_eq!(answer, expected, "the copy sent to {name}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the handler ran to completion once over the replicas");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_sent_to_two_replicas_runs_once() {
    let cluster = Arc::new(InMemoryCluster::default());
    let runs = Arc::new(AtomicUsize::new(0));
    let a = charging(replica(&cluster, "a"), runs.clone()).join().await.unwrap();
    let b = charging(replica(&cluster, "b"), runs.clone()).join().await.unwrap();
    a_retry_runs_once_over(&a, &b, &runs).await;
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_sent_to_two_replicas_on_redis_runs_once() {
    let Some(redis) = Redis::start() else { return };
    let url = redis.url();
    let runs = Arc::new(AtomicUsize::new(0));
    let a = charging(redis_replica(&url, "a"), runs.clone()).join().await.unwrap();
    let b = charging(redis_replica(&url, "b"), runs.clone()).join().await.unwrap();
    a_retry_runs_once_over(&a, &b, &runs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_claims_once_keeps_records_until_they_expire_and_gives_back_only_its_marker() {
    use mcp_proto::SharedOutcome;
    let Some(redis) = Redis::start() else { return };
    let (one, other) = (
        mcp_server::RedisCluster::new(&redis.url(), "ledger").unwrap(),
        mcp_server::RedisCluster::new(&redis.url(), "ledger").unwrap(),
    );
    let now = || u64::try_from(std::time::SystemTime::UNIX_EPOCH.elapsed().unwrap().as_millis()).unwrap();
    let running = SharedOutcome::Running.encode();
    let far = now() + 60_000;
    assert_eq!(one.claim("s1", far).await.unwrap(), None, "the first claim wins");
    assert_eq!(other.claim("s1", far).await.unwrap(), Some(running.clone()), "the other sees the marker");
    let kept = SharedOutcome::Kept { tail: b",\"result\":{\"n\":1}}".to_vec(), fault: None }.encode();
    one.record("s1", Some(kept.clone()), far).await;
    assert_eq!(other.claim("s1", far).await.unwrap(), Some(kept.clone()));
    // Giving a claim back removes the running marker, never an outcome.
    other.record("s1", None, far).await;
    assert_eq!(one.claim("s1", far).await.unwrap(), Some(kept));
    assert_eq!(one.claim("s2", far).await.unwrap(), None);
    one.record("s2", None, far).await;
    assert_eq!(other.claim("s2", far).await.unwrap(), None, "given back: claimable again");
    // A lease that runs out frees the state; a record lives until the state expires.
    assert_eq!(one.claim("s3", now() + 200).await.unwrap(), None);
    one.record("s4", Some(SharedOutcome::Interrupted.encode()), now() + 200).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(other.claim("s3", far).await.unwrap(), None);
    assert_eq!(other.claim("s4", far).await.unwrap(), None);
    // A renewal extends a running claim, and nothing else.
    assert_eq!(one.claim("s5", now() + 200).await.unwrap(), None);
    assert!(one.renew("s5", far).await.unwrap(), "a running claim is renewed");
    assert!(!one.renew("s1", far).await.unwrap(), "an outcome is not a claim to renew");
    assert!(!one.renew("s6", far).await.unwrap(), "nor is a key nobody claimed");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(other.claim("s5", far).await.unwrap(), Some(running.clone()), "renewed past its first lease");
    // Another cluster name is another ledger.
    let elsewhere = mcp_server::RedisCluster::new(&redis.url(), "elsewhere").unwrap();
    assert_eq!(elsewhere.claim("s1", far).await.unwrap(), None);
}

/// Redis's memory for its data, read over a plain connection (`INFO memory`): `used_memory`
/// less what its clients' buffers hold (`mem_clients_normal`) and its Lua heap
/// (`used_memory_lua`, where the arguments of recent scripts wait for the collector): both
/// grow for a while with a large request or reply, and shrink again.
fn redis_used_memory(port: u16) -> u64 {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n").unwrap();
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    while !text.contains("used_memory_peak:") {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "redis closed the INFO connection: {text}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let field = |name: &str| -> u64 {
        text.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse().ok()).unwrap()
    };
    field("used_memory:")
        .saturating_sub(field("mem_clients_normal:"))
        .saturating_sub(field("used_memory_lua:"))
}

/// Issue 23: the Redis task store keeps to its byte budget, shared fairly and enforced in one
/// script: a caller flooding it loses its own oldest records, another caller below its share
/// still has its records kept (and keeps them while the first floods on), a record over its
/// caller's share by itself is refused with `StoreError::Full`, and Redis's memory grows by
/// about the budget, not by the flood.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_task_store_keeps_to_its_byte_budget_shared_fairly() {
    use mcp_server::{StoreError, TaskStore};
    let Some(redis) = Redis::start() else { return };
    const BUDGET: u64 = 4 << 20;
    const RESULT: usize = 256 << 10;
    let store = mcp_server::RedisCluster::new(&redis.url(), "budget").unwrap().with_task_budget(BUDGET);
    let record = |owner: &str, id: String, len: usize| mcp_proto::TaskRecord {
        task_id: id,
        owner: owner.into(),
        task: serde_json::Map::from_iter([("result".to_owned(), json!("x".repeat(len)))]),
        ended_unix_ms: 1,
        ttl_ms: 600_000,
    };
    let held = |owner: &'static str, ids: std::ops::Range<u32>| {
        let store = store.clone();
        async move {
            let mut n = 0;
            for i in ids {
                if store.get(owner.into(), format!("{owner}-{i:03}")).await.unwrap().is_some() {
                    n += 1;
                }
            }
            n
        }
    };
    let before = redis_used_memory(redis.port);
    // Alice floods 64 MiB: every write succeeds, her oldest going to make room.
    for i in 0..256 {
        store.put(record("alice", format!("alice-{i:03}"), RESULT)).await.unwrap();
    }
    let flooded = redis_used_memory(redis.port);
    let fits = (BUDGET / (RESULT as u64 + 1024)) as u32;
    assert!(held("alice", 0..256 - fits).await == 0, "alice's oldest are gone");
    let alice = held("alice", 0..256).await;
    assert!(alice > 0 && alice <= fits, "alice holds {alice}, at most {fits}");
    assert_eq!(held("alice", 256 - alice..256).await, alice, "her newest are the ones kept");

    // Bob, below his share, is stored, at the cost of alice's oldest.
    for i in 0..4 {
        store.put(record("bob", format!("bob-{i:03}"), RESULT)).await.unwrap();
    }
    assert_eq!(held("bob", 0..4).await, 4);
    // Alice flooding on loses her own, never bob's.
    for i in 256..320 {
        store.put(record("alice", format!("alice-{i:03}"), RESULT)).await.unwrap();
    }
    assert_eq!(held("bob", 0..4).await, 4, "bob, within his share, keeps his records");
    // A record larger than carol's share by itself is refused, and pushes nobody out.
    let huge = store.put(record("carol", "carol-000".into(), 3 << 20)).await;
    assert!(matches!(huge, Err(StoreError::Full { .. })), "{huge:?}");
    assert_eq!(held("bob", 0..4).await, 4);
    let after = redis_used_memory(redis.port);
    eprintln!(
        "redis used_memory: {before} before, {flooded} after alice's 64 MiB flood, {after} at the end \
         (budget {BUDGET})"
    );
    assert!(after.saturating_sub(before) < 2 * BUDGET, "redis grew by {} bytes", after - before);
    assert!(flooded.saturating_sub(before) < 2 * BUDGET, "redis grew by {} bytes", flooded - before);

    // Redis down: the write fails, and says so.
    drop(redis);
    let down = store.put(record("bob", "bob-009".into(), 10)).await;
    assert!(matches!(down, Err(StoreError::Unavailable(_))), "{down:?}");
}

/// Routing to the holder on Redis: a legacy session initialized on replica a is served through
/// replica b (forwarded to a, as its `Mcp-Served-By` says), found through the directory keys
/// `mcp:fwd:held:session:<id>` and `mcp:fwd:replica:a`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_a_legacy_session_of_one_replica_is_served_through_another() {
    use mcp_tests::http::{Client as HttpClient, Req};
    let Some(redis) = Redis::start() else { return };
    let url = redis.url();
    let mut addrs = Vec::new();
    for name in ["a", "b"] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cluster = Arc::new(mcp_server::RedisCluster::new(&url, "fwd").unwrap());
        let server = replica(&Arc::new(InMemoryCluster::default()), name)
            .cluster(cluster as Arc<dyn Cluster>, name)
            .cluster_advertise(format!("http://{addr}/mcp"))
            .join()
            .await
            .unwrap();
        tokio::spawn(async move {
            let _ = mcp_tokio::serve_http(listener, server, mcp_proto::http::HttpConfig::default()).await;
        });
        addrs.push(addr);
    }
    let (a, b) = (addrs[0], addrs[1]);
    let checked = tokio::task::spawn_blocking(move || -> Result<(), String> {
        let send = |addr, req: &Req| HttpClient::connect(addr).map_err(|e| e.to_string())?.request(req);
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}});
        let resp = send(a, &Req::post(init.to_string()))?;
        let sid = resp.header("mcp-session-id").ok_or(format!("no session: {resp:?}"))?.to_owned();
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
        let legacy = |body: &str| {
            Req::post(body.to_owned()).header("MCP-Protocol-Version", "2025-11-25").header("Mcp-Session-Id", &sid)
        };
        // a advertises within its first heartbeat; until then b answers 404 itself.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let resp = send(b, &legacy(&list))?;
            if resp.status() == 200 {
                if resp.header("mcp-served-by") != Some("a") {
                    return Err(format!("not forwarded to a: {resp:?}"));
                }
                let tools = resp.json()?;
                return match tools["result"]["tools"].as_array() {
                    Some(t) if !t.is_empty() => Ok(()),
                    _ => Err(format!("tools through b: {tools}")),
                };
            }
            if std::time::Instant::now() > deadline {
                return Err(format!("never served through b: {resp:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await
    .unwrap();
    checked.unwrap();
}

/// An `InMemoryCluster` as one replica sees it, until `cut`: from then on the replica's records
/// and renewals are lost, as if it had died mid-call (its claims are left to lapse).
struct Severable {
    inner: Arc<InMemoryCluster>,
    cut: std::sync::atomic::AtomicBool,
}

impl Cluster for Severable {
    fn publish(&self, event: mcp_server::ClusterEvent) {
        self.inner.publish(event)
    }
    fn subscribe(&self) -> futures_util::stream::BoxStream<'static, mcp_server::ClusterEvent> {
        self.inner.subscribe()
    }
    fn key_ring(&self) -> mcp_server::BoxFuture<Result<mcp_server::SharedKeys, mcp_server::ClusterError>> {
        self.inner.key_ring()
    }
    fn rotate_keys(
        &self,
        new: [u8; 32],
        keep: usize,
    ) -> mcp_server::BoxFuture<Result<mcp_server::SharedKeys, mcp_server::ClusterError>> {
        self.inner.rotate_keys(new, keep)
    }
    fn task_store(&self) -> Arc<dyn mcp_server::TaskStore> {
        self.inner.task_store()
    }
    fn start(&self, rt: Arc<dyn mcp_server::Runtime>) {
        self.inner.start(rt)
    }
    fn claim(
        &self,
        key: &str,
        lease_until_ms: u64,
    ) -> mcp_server::BoxFuture<Result<Option<Vec<u8>>, mcp_server::ClusterError>> {
        self.inner.claim(key, lease_until_ms)
    }
    fn record(&self, key: &str, outcome: Option<Vec<u8>>, expires_at_ms: u64) -> mcp_server::BoxFuture<()> {
        if self.cut.load(Ordering::SeqCst) {
            return Box::pin(std::future::ready(()));
        }
        self.inner.record(key, outcome, expires_at_ms)
    }
    fn renew(
        &self,
        key: &str,
        lease_until_ms: u64,
    ) -> mcp_server::BoxFuture<Result<bool, mcp_server::ClusterError>> {
        if self.cut.load(Ordering::SeqCst) {
            return Box::pin(std::future::ready(Err(mcp_server::ClusterError("cut".into()))));
        }
        self.inner.renew(key, lease_until_ms)
    }
}

/// A tool that asks, then on its retry hangs (on the replica that is to die) or answers (on
/// the one that survives), counting its runs past the question.
fn hanging(b: ServerBuilder, hang: bool, runs: Arc<AtomicUsize>) -> ServerBuilder {
    let mut b = b.tool(
        Tool::new("charge", "Charges once confirmed", json!({"type": "object"})),
        move |call: ToolCall| {
            let runs = runs.clone();
            async move {
                let form = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
                let confirm = InputRequest::elicit("Charge?", form)
                    .map_err(|e| HandlerError::private(e.to_string()))?;
                match call.ctx.ask_one("confirm", confirm).await {
                    Ok(_) => {}
                    Err(AskError::Suspended) => return Err(HandlerError::Cancelled),
                    Err(e) => return Err(e.into()),
                }
                runs.fetch_add(1, Ordering::SeqCst);
                if hang {
                    std::future::pending::<()>().await;
                }
                Ok::<_, HandlerError>(ToolOutput::text("charged"))
            }
        },
    );
    b.config_mut().limits.claim_lease(Duration::from_secs(1));
    b
}

/// The replica running a retry renews its claim while the call runs (copies elsewhere are
/// refused `in_progress` for as long as it takes), and a replica that dies mid-call frees it
/// within one lease: a copy sent to another replica then runs there, rather than being refused
/// until the state expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_renewed_while_its_call_runs_and_lapses_when_its_replica_dies() {
    let cluster = Arc::new(InMemoryCluster::default());
    let dying =
        Arc::new(Severable { inner: cluster.clone(), cut: std::sync::atomic::AtomicBool::new(false) });
    let (runs_a, runs_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let a = hanging(Server::builder("cluster-test", "1"), true, runs_a.clone())
        .cluster(dying.clone() as Arc<dyn Cluster>, "a")
        .join()
        .await
        .unwrap();
    let b = hanging(Server::builder("cluster-test", "1"), false, runs_b.clone())
        .cluster(cluster.clone() as Arc<dyn Cluster>, "b")
        .join()
        .await
        .unwrap();
    let mut on_a = Client::connect(&a);
    let mut on_b = Client::connect(&b);
    let first = on_a.request(1, "tools/call", modern_call(json!({}))).await;
    let state = first["result"]["requestState"].as_str().expect("a state").to_owned();
    let retry = modern_call(json!({"requestState": state,
        "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}}}));
    // The retry reaches a first, which claims it and hangs in its handler.
    on_a.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": retry.clone()})).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while runs_a.load(Ordering::SeqCst) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "a never ran the retry");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Three leases later, a copy on b is still refused: a renews its claim (every third of a
    // lease, so a renewal may come two thirds of a second late before the claim lapses).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let copy = on_b.request(3, "tools/call", retry.clone()).await;
    assert_eq!(copy["error"]["data"]["reason"], "in_progress", "{copy}");
    assert_eq!(runs_b.load(Ordering::SeqCst), 0);
    // a dies (nothing it writes arrives any more): within a lease or so, b runs the copy.
    dying.cut.store(true, Ordering::SeqCst);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let answer = loop {
        let answer = on_b.request(4, "tools/call", retry.clone()).await;
        if answer["error"]["data"]["reason"] != "in_progress" {
            break answer;
        }
        assert!(tokio::time::Instant::now() < deadline, "the dead replica's claim never lapsed: {answer}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(answer["result"]["content"][0]["text"], "charged", "{answer}");
    assert_eq!(runs_b.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn shards_tell_their_listeners_of_a_catalogue_edit_once_each() {
    let shards = replica_builder().build_shards(Some(3)).await.unwrap();
    let mut clients = Vec::new();
    for s in shards.servers() {
        let mut c = Client::initialized(s).await;
        // `notifications/initialized` has no answer: a ping after it is answered once the
        // session listens.
        c.request(1, "ping", json!({})).await;
        clients.push(c);
    }
    let removed = shards.servers().first().map(|s| s.remove_tool("t3"));
    assert_eq!(removed, Some(true));
    let mut all = Vec::new();
    for c in clients.iter_mut() {
        all.push(c.notes(Duration::from_millis(500)).await);
    }
    for (i, seen) in all.iter().enumerate() {
        assert_eq!(seen, &["notifications/tools/list_changed"], "shard {i} hears the edit once: {all:?}");
    }
    for s in shards.servers() {
        assert!(s.introspect().tools.iter().all(|t| t.name() != "t3"), "every shard lost t3");
    }
}

/// The replicas' items, for shards (which join a cluster of their own).
fn replica_builder() -> ServerBuilder {
    let mut b = Server::builder("cluster-test", "1");
    for i in 0..5 {
        b = b.tool(Tool::new(format!("t{i}"), "d", json!({"type": "object"})), |_: ToolCall| async {
            Ok::<_, mcp_proto::HandlerError>(ToolOutput::text("ok"))
        });
    }
    b
}
