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
    let threads = args.threads.unwrap_or(1);
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
    let server = everything::build_replica(&args).await;
    // SIGINT or SIGTERM: refuse new work, let calls in flight finish (for up to the budget) and
    // answer them, then exit 0.
    let stop =
        tokio::spawn(mcp_tokio::shutdown_on_signal(server.clone(), everything::shutdown_budget(&server)));
    if let Some(addr) = &args.http {
        let served = async {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            everything::announce(listener.local_addr()?, &args);
            // Returns once the shutdown began; `stop` ends when it is over.
            let http = everything::http_config(&args);
            #[cfg(feature = "tls")]
            if let Some(tls) = everything::tls_config(&args) {
                mcp_tokio::serve_https(listener, server.clone(), http.clone(), tls).await?;
            } else {
                mcp_tokio::serve_http(listener, server.clone(), http).await?;
            }
            #[cfg(not(feature = "tls"))]
            mcp_tokio::serve_http(listener, server.clone(), http).await?;
            stop.await.map_err(std::io::Error::other)?
        };
        match served.await {
            Ok(report) => everything::stopped(report.cancelled),
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
