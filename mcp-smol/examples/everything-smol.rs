//! The demo server on smol: `cargo run --release -p mcp-smol --example everything-smol`.
//! The server itself is defined once, in examples/common/everything.rs, for both shims.

#[path = "../../examples/common/everything.rs"]
mod everything;

fn main() {
    let args = everything::parse_args().unwrap_or_else(|msg| {
        eprintln!("{msg}");
        std::process::exit(2)
    });
    everything::init_logging();
    let server = everything::build(&args);
    if let Some(addr) = &args.http {
        let served = smol::block_on(async {
            let listener = smol::net::TcpListener::bind(addr.as_str()).await?;
            everything::announce(listener.local_addr()?);
            mcp_smol::serve_http(listener, server, everything::http_options(&args)).await
        });
        if let Err(e) = served {
            tracing::error!(%e, "HTTP server failed");
            eprintln!("everything-smol: {addr}: {e}");
            std::process::exit(1)
        }
        return;
    }
    match smol::block_on(mcp_smol::serve_stdio_as(&server, args.caller())) {
        Ok(end) => tracing::info!(?end, "stdio session ended"),
        Err(e) => {
            tracing::error!(%e, "stdio session failed");
            std::process::exit(1)
        }
    }
}
