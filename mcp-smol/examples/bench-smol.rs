//! The benchmark server on smol: `bench-smol [--http ADDR]`, the everything example's `--bench`
//! catalogue in a binary of its own (see examples/common/bench.rs for why), on one thread
//! (`mcp_smol::block_on`) as the everything example runs by default.

#[path = "../../examples/common/bench.rs"]
mod bench;
// Only `bench_server` is used here: the linker drops the rest of the demo.
#[allow(dead_code)]
#[path = "../../examples/common/everything.rs"]
mod everything;

fn main() {
    let http = bench::http_addr("bench-smol");
    let server = everything::bench_server();
    let served = mcp_smol::block_on(async {
        match &http {
            Some(addr) => {
                let listener = smol::net::TcpListener::bind(addr.as_str()).await?;
                bench::listening(listener.local_addr()?);
                mcp_smol::serve_http(listener, server, mcp_smol::HttpConfig::default()).await
            }
            None => mcp_smol::serve_stdio(&server).await.map(drop),
        }
    });
    bench::exit_on_error("bench-smol", served);
}
