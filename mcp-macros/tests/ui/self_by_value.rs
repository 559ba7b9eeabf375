struct Counter;

#[mcp_server::tools]
impl Counter {
    /// Consumes the counter.
    #[tool]
    async fn finish(self) -> String {
        String::new()
    }
}

fn main() {}
