//! Several servers in one process sharing an `InMemoryCluster` (issue 14): a change raised on
//! one replica reaches the listeners of another, once, and never travels back; the replicas
//! share one key ring, so a cursor one signs pages on another; rotation reaches every replica.

use std::sync::Arc;
use std::time::Duration;

use mcp_proto::{Caller, Resource, ResourceContents, Tool, ToolOutput};
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
