/// Echoes what it is given.
#[mcp_server::tool]
async fn echo<T: ToString>(value: T) -> String {
    value.to_string()
}

fn main() {}
