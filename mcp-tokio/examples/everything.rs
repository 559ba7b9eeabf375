//! The demo server on tokio: `cargo run --release -p mcp-tokio --example everything`.
//! The server itself is defined once, in examples/common/everything.rs, for both shims.

#[path = "../../examples/common/everything.rs"]
mod everything;

fn main() {
    let args = everything::parse_args().unwrap_or_else(|msg| {
        eprintln!("{msg}");
        std::process::exit(2)
    });
    // One thread by default, for stdio and HTTP alike: the engine's driver is one task, so a
    // second worker mostly adds cross-thread wake-ups between the connections, the driver and
    // the handlers. Measured on 2 cores with ../shared/bench at 16 clients: one thread served
    // 1.9x the HTTP echo requests of two workers (63k against 34k per second) and as many
    // `tools/list`; over stdio about 1.3x. CPU-bound handlers belong on the blocking pool
    // (`blocking_tool`) either way; `--threads N` gives the runtime N workers.
    let threads = args.threads.or(args.shards).unwrap_or(1);
    let mut runtime = match threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
    };
    let runtime = runtime.enable_all().build().unwrap_or_else(|e| {
        eprintln!("everything: cannot start the tokio runtime: {e}");
        std::process::exit(1)
    });
    runtime.block_on(run(args));
}

async fn run(args: everything::Args) {
    everything::init_logging();
    let shards = everything::build_shards(&args).await;
    let server = shards.first().clone();
    // SIGINT or SIGTERM: refuse new work, let calls in flight finish (for up to the budget) and
    // answer them, then exit 0.
    let stop =
        tokio::spawn(mcp_tokio::shutdown_on_signal(shards.clone(), everything::shutdown_budget(&server)));
    if let Some(addr) = &args.http {
        let served = async {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            everything::announce(listener.local_addr()?, &args);
            // Returns once the shutdown began; `stop` ends when it is over.
            let http = everything::http_config(&args);
            #[cfg(feature = "tls")]
            if let Some(tls) = everything::tls_config(&args) {
                mcp_tokio::serve_https(listener, shards.clone(), http.clone(), tls).await?;
            } else {
                mcp_tokio::serve_http(listener, shards.clone(), http).await?;
            }
            #[cfg(not(feature = "tls"))]
            mcp_tokio::serve_http(listener, shards.clone(), http).await?;
            stop.await.map_err(std::io::Error::other)?
        };
        match served.await {
            Ok(report) => everything::stopped(&shards, &args, report.cancelled),
            Err(e) => {
                tracing::error!(%e, "HTTP server failed");
                eprintln!("everything: {addr}: {e}");
                std::process::exit(1)
            }
        }
        return;
    }
    // The session ends by itself at end of input, or once a signal's shutdown answered its calls.
    match mcp_tokio::serve_stdio_as(&server, args.caller()).await {
        Ok(end) => tracing::info!(?end, "stdio session ended"),
        Err(e) => {
            tracing::error!(%e, "stdio session failed");
            std::process::exit(1)
        }
    }
}

// The demo's tools, driven in memory through the in-process test client: what they do, not how
// the binary starts (tests/tests/examples_signals.rs and http_examples.rs run the binary).
#[cfg(test)]
mod tests {
    use mcp_tokio::testing::{self, Client, ClientError};
    use mcp_tokio::{Caller, Server};
    use serde_json::{json, Value};

    fn server() -> Server {
        super::everything::build(&super::everything::Args::default())
    }

    fn names(tools: &[Value]) -> Vec<&str> {
        tools.iter().filter_map(|t| t["name"].as_str()).collect()
    }

    /// `echo` echoes and `add` sums exactly, digits a float would lose included.
    #[tokio::test]
    async fn echo_and_exact_add() -> Result<(), ClientError> {
        let mut client = testing::connect(&server()).await?;
        assert_eq!(client.call_tool("echo", json!({"text": "hi"})).await?.text(), Some("hi"));
        let sum = client.call_tool("add", json!({"a": 0.1, "b": 0.2})).await?;
        assert_eq!(sum.text(), Some("0.3"));
        let big = client.call_tool("add", json!({"a": 9007199254740993_u64, "b": 1})).await?;
        assert_eq!(big.text(), Some("9007199254740994"));
        Ok(())
    }

    /// `admin_echo` and the admin resource exist only for a caller with the admin role, as
    /// `--role admin` makes the stdio caller.
    #[tokio::test]
    async fn admin_items_are_for_admins() -> Result<(), ClientError> {
        let server = server();
        let mut anonymous = testing::connect(&server).await?;
        assert!(!names(&anonymous.list_tools().await?).contains(&"admin_echo"));
        assert!(matches!(anonymous.read_resource("test://admin-secret").await, Err(ClientError::Rpc(_))));

        let mut admin = Caller::identified("stdio");
        admin.roles.push("admin".into());
        let mut admin = testing::connect_with(&server, Client::builder().caller(admin)).await?;
        assert!(names(&admin.list_tools().await?).contains(&"admin_echo"));
        assert_eq!(admin.read_resource("test://admin-secret").await?.text(), Some("The admin secret."));
        Ok(())
    }

    /// `test_elicitation` asks the client and reports what the user answered.
    #[tokio::test]
    async fn elicitation_fixture_reports_the_answer() -> Result<(), ClientError> {
        let options = Client::builder().on_elicitation(|params| {
            assert_eq!(params["message"], "Who are you?");
            Ok(json!({"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}))
        });
        let mut client = testing::connect_with(&server(), options).await?;
        let reply = client.call_tool("test_elicitation", json!({"message": "Who are you?"})).await?;
        let text = reply.text().unwrap_or_default();
        assert!(text.starts_with("User response: action=accept"), "{text}");
        assert!(text.contains("ada@example.com"), "{text}");
        Ok(())
    }

    /// `test_trigger_tool_change` adds `test_dynamic_tool` and the session is told the list
    /// changed; a second call removes it again.
    #[tokio::test]
    async fn trigger_tool_change_notifies() -> Result<(), ClientError> {
        let mut client = testing::connect(&server()).await?;
        client.call_tool("test_trigger_tool_change", json!({})).await?;
        client.notification("notifications/tools/list_changed").await?;
        assert!(names(&client.list_tools().await?).contains(&"test_dynamic_tool"));
        assert_eq!(
            client.call_tool("test_dynamic_tool", json!({})).await?.text(),
            Some("dynamic tool called")
        );
        client.call_tool("test_trigger_tool_change", json!({})).await?;
        client.notification("notifications/tools/list_changed").await?;
        assert!(!names(&client.list_tools().await?).contains(&"test_dynamic_tool"));
        Ok(())
    }

    /// `test_tool_with_logging` logs to a session that set a level, under the `everything` logger.
    #[tokio::test]
    async fn logging_fixture_logs() -> Result<(), ClientError> {
        let mut client = testing::connect(&server()).await?;
        client.request("logging/setLevel", json!({"level": "info"})).await?;
        client.call_tool("test_tool_with_logging", json!({})).await?;
        let logged: Vec<Value> = client
            .notifications()?
            .into_iter()
            .filter(|n| n.method == "notifications/message")
            .map(|n| n.params["data"].clone())
            .collect();
        assert_eq!(logged, ["Tool execution started", "Tool processing data", "Tool execution completed"]);
        Ok(())
    }
}
