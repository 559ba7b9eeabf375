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
    match args.threads.or(args.shards).unwrap_or(1) {
        // Everything on this thread (see `mcp_smol::block_on` for why, and what it measured).
        1 => mcp_smol::block_on(run(args)),
        // Several threads, so that several shards have cores to run on: connections and
        // handlers go to smol's global executor, given that many threads unless the
        // environment already chose (`SMOL_THREADS`, read when it first spawns).
        n => {
            if std::env::var_os("SMOL_THREADS").is_none() {
                std::env::set_var("SMOL_THREADS", n.to_string());
            }
            smol::block_on(run(args))
        }
    }
}

async fn run(args: everything::Args) {
    let shards = everything::build_shards(&args).await;
    let server = shards.first().clone();
    // SIGINT or SIGTERM (unix): refuse new work, let calls in flight finish (for up to the
    // budget) and answer them, then exit 0.
    let stop =
        smol::spawn(mcp_smol::shutdown_on_signal(shards.clone(), everything::shutdown_budget(&server)));
    if let Some(addr) = &args.http {
        let served = async {
            let listener = smol::net::TcpListener::bind(addr.as_str()).await?;
            everything::announce(listener.local_addr()?, &args);
            // Returns once the shutdown began; `stop` ends when it is over.
            let http = everything::http_config(&args);
            #[cfg(feature = "tls")]
            if let Some(tls) = everything::tls_config(&args) {
                mcp_smol::serve_https(listener, shards.clone(), http.clone(), tls).await?;
            } else {
                mcp_smol::serve_http(listener, shards.clone(), http).await?;
            }
            #[cfg(not(feature = "tls"))]
            mcp_smol::serve_http(listener, shards.clone(), http).await?;
            stop.await
        }
        .await;
        match served {
            Ok(report) => everything::stopped(&shards, &args, report.cancelled),
            Err(e) => {
                tracing::error!(%e, "HTTP server failed");
                eprintln!("everything-smol: {addr}: {e}");
                std::process::exit(1)
            }
        }
        return;
    }
    // The session ends by itself at end of input, or once a signal's shutdown answered its calls.
    match mcp_smol::serve_stdio_as(&server, args.caller()).await {
        Ok(end) => tracing::info!(?end, "stdio session ended"),
        Err(e) => {
            tracing::error!(%e, "stdio session failed");
            std::process::exit(1)
        }
    }
}
