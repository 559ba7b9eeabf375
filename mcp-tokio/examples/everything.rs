//! The demo server on tokio: `cargo run --release -p mcp-tokio --example everything`.
//! The server itself is defined once, in examples/common/everything.rs, for both shims.

#[path = "../../examples/common/everything.rs"]
mod everything;

fn main() {
    let args = everything::parse_args().unwrap_or_else(|msg| {
        eprintln!("{msg}");
        std::process::exit(2)
    });
    // One pipe is served best by one thread: a handler the session spawns runs on the same
    // thread, with no other thread to wake (measured: about 1.3x the requests per second of a
    // multi-thread runtime at 16 in flight, and a lower latency alone). HTTP's many connections
    // use every core.
    let mut runtime = if args.http.is_some() {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = runtime.enable_all().build().unwrap_or_else(|e| {
        eprintln!("everything: cannot start the tokio runtime: {e}");
        std::process::exit(1)
    });
    runtime.block_on(run(args));
}

async fn run(args: everything::Args) {
    everything::init_logging();
    let server = everything::build(&args);
    // SIGINT or SIGTERM: refuse new work, let calls in flight finish (for up to the budget) and
    // answer them, then exit 0.
    let stop =
        tokio::spawn(mcp_tokio::shutdown_on_signal(server.clone(), everything::shutdown_budget(&server)));
    if let Some(addr) = &args.http {
        let served = async {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            everything::announce(listener.local_addr()?);
            // Returns once the shutdown began; `stop` ends when it is over.
            mcp_tokio::serve_http(listener, server, everything::http_config(&args)).await?;
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
