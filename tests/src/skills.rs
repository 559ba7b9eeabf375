//! The replay runner's skill fixtures (`! skills NAME... | all`, `! register skill NAME`).

use std::time::Duration;

use mcp_proto::{CacheHint, Gate, Skill};
use serde_json::json;

/// The test skills, in `SKILL.md` URI order: `refunds` (nested under a prefix, shared for five
/// minutes, one file in a subdirectory), `admin-audit` (only the `admin` role sees it) and
/// `pdf-processing` (private, text files two directories deep, a binary file).
pub fn fixture_skills() -> Vec<Skill> {
    vec![
        Skill::new("skill://acme/billing/refunds", "Process customer refund requests", "# Refunds\n")
            .field("license", json!("Apache-2.0"))
            .file("examples/email.md", "text/markdown", "Dear customer,\n")
            .cache(CacheHint::shared(Duration::from_secs(300))),
        Skill::new("skill://mcp-rs/admin-audit", "Review the audit log (admins only)", "# Audit\n")
            .gate(Gate::role("admin")),
        Skill::new("skill://pdf-processing", "Extract, fill, and assemble PDF documents", "# PDF\n")
            .field("metadata", json!({"version": "2.1.0"}))
            .file("templates/invoice.md", "text/markdown", "# Invoice\n")
            .file("templates/regional/eu.md", "text/markdown", "# EU invoice\n")
            .file("scripts/extract.py", "text/x-python", "print('pdf')\n")
            .file("assets/dot.bin", "application/octet-stream", vec![0u8, 159, 146, 150]),
    ]
}

/// The fixture named `name` (its last root segment), or else a minimal skill
/// `skill://extra/<name>` with only its `SKILL.md`.
pub fn skill(name: &str) -> Skill {
    fixture_skills()
        .into_iter()
        .find(|s| s.name() == name)
        .unwrap_or_else(|| Skill::new(format!("skill://extra/{name}"), format!("The extra skill {name}"), ""))
}
