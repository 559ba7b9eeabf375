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
    match smol::block_on(mcp_smol::serve_stdio_as(&server, args.caller())) {
        Ok(end) => tracing::info!(?end, "stdio session ended"),
        Err(e) => {
            tracing::error!(%e, "stdio session failed");
            std::process::exit(1)
        }
    }
}
