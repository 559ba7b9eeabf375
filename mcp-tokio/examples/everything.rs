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
    if let Some(addr) = &args.http {
        let served = async {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            everything::announce(listener.local_addr()?);
            mcp_tokio::serve_http(listener, server, everything::http_options(&args)).await
        };
        if let Err(e) = served.await {
            tracing::error!(%e, "HTTP server failed");
            eprintln!("everything: {addr}: {e}");
            std::process::exit(1)
        }
        return;
    }
    match mcp_tokio::serve_stdio_as(&server, args.caller()).await {
        Ok(end) => tracing::info!(?end, "stdio session ended"),
        Err(e) => {
            tracing::error!(%e, "stdio session failed");
            std::process::exit(1)
        }
    }
}
