//! The benchmark server on tokio: `bench [--http ADDR]`, the everything example's `--bench`
//! catalogue in a binary of its own (see examples/common/bench.rs for why), on one thread as
//! the everything example runs by default.

#[path = "../../examples/common/bench.rs"]
mod bench;
// Only `bench_server` is used here: the linker drops the rest of the demo.
#[allow(dead_code)]
#[path = "../../examples/common/everything.rs"]
mod everything;

fn main() {
    let http = bench::http_addr("bench");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| {
        eprintln!("bench: cannot start the tokio runtime: {e}");
        std::process::exit(1)
    });
    let server = everything::bench_server();
    let served = runtime.block_on(async {
        match &http {
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(addr).await?;
                bench::listening(listener.local_addr()?);
                mcp_tokio::serve_http(listener, server, mcp_tokio::HttpConfig::default()).await
            }
            None => mcp_tokio::serve_stdio(&server).await.map(drop),
        }
    });
    bench::exit_on_error("bench", served);
}
