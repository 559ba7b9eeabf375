// Deserializable, but with no schema for the tool's inputSchema.
#[derive(serde::Deserialize)]
struct Point {
    x: f64,
}

/// Tells how far a point is from the axis.
#[mcp_server::tool]
async fn distance(point: Point) -> String {
    point.x.abs().to_string()
}

fn main() {}
