//! The everything example as one replica of several (`--cluster redis://HOST:PORT`,
//! `--replica NAME`): changes, the key ring and ended tasks go through Redis (see
//! `mcp_server::cluster`), and a `replica_status` tool says which replica answered, how it
//! stands with the cluster, and how many times it ran `replica_counted_confirm` (a 2026-07-28
//! tool that asks for a confirmation, then counts) to completion: the scale harness sends one
//! retry of it to every replica and checks that the sum grew by one (the shared replay ledger).
//! Without `--cluster` nothing here is used.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use mcp_proto::interaction::InputRequest;
use mcp_proto::{HandlerError, Tool, ToolOutput};
use mcp_server::{Cluster, ClusterHealth, RedisCluster, Server, ServerBuilder, ToolCall};
use serde_json::json;

/// The cluster name every replica of the example shares: one pub/sub channel and one key
/// namespace on the Redis server.
const CLUSTER_NAME: &str = "everything";

/// Makes `builder` a replica of the cluster at `url` named `replica`, with the
/// `replica_status` tool, and builds it with the shared key ring. Exits (status 1) when the
/// URL is malformed or Redis cannot give the key ring: a replica that signs with a key of its
/// own would refuse every other replica's cursors.
pub(crate) async fn join(builder: ServerBuilder, url: &str, replica: &str) -> Server {
    let cluster = RedisCluster::new(url, CLUSTER_NAME).unwrap_or_else(|e| {
        eprintln!("everything: --cluster {url}: {e}");
        std::process::exit(2)
    });
    let name = replica.to_owned();
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let counter = replica.to_owned();
    let builder = builder
        .tool(
            Tool::new(
                "replica_status",
                "Which replica answered, and whether it is in touch with its cluster",
                json!({"type": "object", "properties": {}}),
            ),
            move |call: ToolCall| {
                let name = name.clone();
                let runs = runs.load(Ordering::SeqCst);
                async move {
                    let status = call.ctx.server().status();
                    let (cluster, queued) = match status.cluster {
                        ClusterHealth::Connected => ("connected", 0),
                        ClusterHealth::Degraded { queued } => ("degraded", queued),
                        _ => ("standalone", 0),
                    };
                    ToolOutput::text(
                        json!({"replica": name, "cluster": cluster, "queued": queued, "counted_runs": runs})
                            .to_string(),
                    )
                }
            },
        )
        .tool(
            Tool::new(
                "replica_counted_confirm",
                "Asks for a confirmation (key confirm), then counts a run on this replica (see replica_status)",
                json!({"type": "object", "properties": {}}),
            ),
            move |call: ToolCall| {
                let (counted, counter) = (counted.clone(), counter.clone());
                async move {
                    let form = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
                    let ask = InputRequest::elicit("Count a run?", form)
                        .map_err(|e| HandlerError::private(e.to_string()))?;
                    let answer = call.ctx.ask_one("confirm", ask).await?;
                    let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
                    let action = answer["action"].as_str().unwrap_or("");
                    // Names the replica: copies answered from its record say where it ran.
                    Ok::<_, HandlerError>(ToolOutput::text(format!("counted ({action}) on {counter}, its run {n}")))
                }
            },
        )
        .cluster(Arc::new(cluster) as Arc<dyn Cluster>, replica);
    match builder.join().await {
        Ok(server) => {
            tracing::info!(replica, cluster = url, "joined the cluster");
            server
        }
        Err(e) => {
            eprintln!("everything: replica {replica}: {e}");
            std::process::exit(1)
        }
    }
}
