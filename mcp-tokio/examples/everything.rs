//! The demo server on tokio: `cargo run --release -p mcp-tokio --example everything`.
//! The server itself is defined once, in examples/common/everything.rs, for both shims.

#[path = "../../examples/common/everything.rs"]
mod everything;

#[tokio::main]
async fn main() {
    let args = everything::parse_args().unwrap_or_else(|msg| {
        eprintln!("{msg}");
        std::process::exit(2)
    });
    everything::init_logging();
    let server = everything::build(&args);
    // SIGINT or SIGTERM: refuse new work, let calls in flight finish (for up to the budget) and
    // answer them, then exit 0.
    let stop = tokio::spawn(mcp_tokio::shutdown_on_signal(server.clone(), everything::SHUTDOWN_BUDGET));
    if let Some(addr) = &args.http {
        let served = async {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            everything::announce(listener.local_addr()?);
            // Returns once the shutdown began; `stop` ends when it is over.
            mcp_tokio::serve_http(listener, server, everything::http_options(&args)).await?;
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
