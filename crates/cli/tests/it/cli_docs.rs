//! docs/cli.md is the command reference: examples by task, written by hand, then every
//! command's and subcommand's `--help`, verbatim. This test renders the second part from
//! the binary and requires the file to be equal, so the reference cannot drift from the
//! flags. After changing a flag or its help:
//! `GRANARY_BLESS=1 cargo test -p granary --test it cli_docs` rewrites the file.

use std::path::Path;
use std::process::Command;

/// Everything above this line in docs/cli.md is written by hand (examples by task);
/// everything below it is the binary's `--help`, rendered by this test.
const MARKER: &str =
    "<!-- Generated from --help by crates/cli/tests/it/cli_docs.rs: do not edit below. -->\n";

fn help(path: &[String]) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_granary"));
    c.args(path).arg("--help");
    // The help shows the values of these variables when they are set.
    for v in [
        "GRANARY_DATA_DIR",
        "GRANARY_SOCKET",
        "GRANARY_CATALOG",
        "GRANARY_LOG",
        "GRANARY_LOG_FORMAT",
        "COLUMNS",
    ] {
        c.env_remove(v);
    }
    let out = c.output().expect("run granary --help");
    assert!(
        out.status.success(),
        "granary {} --help failed: {}",
        path.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The subcommands a help text lists (its `Commands:` block), without `help`.
fn subcommands(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in help.lines() {
        if line == "Commands:" {
            inside = true;
            continue;
        }
        if inside {
            if !line.starts_with("  ") {
                break;
            }
            // "  name   description": a continuation line is indented further.
            if line.starts_with("   ") {
                continue;
            }
            if let Some(name) = line.split_whitespace().next() {
                if name != "help" {
                    out.push(name.to_string());
                }
            }
        }
    }
    out
}

fn render(path: &mut Vec<String>, doc: &mut String) {
    let text = help(path);
    let title = if path.is_empty() {
        "granary".to_string()
    } else {
        format!("granary {}", path.join(" "))
    };
    let level = "#".repeat((path.len() + 2).min(4));
    doc.push_str(&format!("\n{level} `{title}`\n\n```text\n{}```\n", text));
    for sub in subcommands(&text) {
        path.push(sub);
        render(path, doc);
        path.pop();
    }
}

#[test]
fn cli_reference_equals_every_commands_help() {
    let mut generated = String::new();
    render(&mut Vec::new(), &mut generated);
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
    let text = std::fs::read_to_string(&file).expect("docs/cli.md");
    let head = match text.find(MARKER) {
        Some(i) => &text[..i],
        None => panic!("docs/cli.md lacks the line {MARKER:?} that starts the generated part"),
    };
    let doc = format!("{head}{MARKER}{generated}");
    if std::env::var("GRANARY_BLESS").as_deref() == Ok("1") {
        std::fs::write(&file, &doc).expect("write docs/cli.md");
        return;
    }
    let have = text;
    if have != doc {
        let first = have
            .lines()
            .zip(doc.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(have.lines().count().min(doc.lines().count()));
        panic!(
            "docs/cli.md differs from the binary's --help from line {} on:\n  file: {:?}\n  help: {:?}\n\
             Run `GRANARY_BLESS=1 cargo test -p granary --test it cli_docs` and commit docs/cli.md.",
            first + 1,
            have.lines().nth(first).unwrap_or("<end>"),
            doc.lines().nth(first).unwrap_or("<end>")
        );
    }
    // The reference covers the commands users meet first.
    for c in [
        "## `granary daemon`",
        "## `granary get`",
        "### `granary face list`",
    ] {
        assert!(doc.contains(c), "{c} missing from the reference");
    }
}
