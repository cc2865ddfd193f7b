//! The README's test command's own scripts: what they print at the end of a run must
//! never turn a green run red.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A whole-workspace run records ~700 tests; once the times file outgrew a pipe buffer,
/// `sort | head` under pipefail ended a run with every test passed as exit 141.
#[test]
fn the_slowest_ten_come_from_a_times_file_of_any_length() {
    let dir = tempfile::tempdir().unwrap();
    let times = dir.path().join("times");
    let mut text = String::new();
    for i in 0..40_000u32 {
        // Distinct seconds, none above the one marked below.
        text.push_str(&format!(
            "{}.{:03}\tsome::module::a_long_descriptive_test_name_{i} ok\n",
            i % 500,
            i % 1000
        ));
    }
    text.push_str("9999.5\tthe::slowest ok\n");
    std::fs::write(&times, text).unwrap();
    let out = Command::new("bash")
        .arg(root().join("scripts/slowest-tests.sh"))
        .arg(&times)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "slowest-tests.sh exited {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 10, "{stdout}");
    assert_eq!(lines[0].trim(), "9999.5  the::slowest ok");
}

/// No script the test command runs closes a pipe early under pipefail.
#[test]
fn the_test_command_scripts_do_not_pipe_into_head() {
    for script in [
        "scripts/test.sh",
        "scripts/test-runner.sh",
        "scripts/slowest-tests.sh",
    ] {
        let text = std::fs::read_to_string(root().join(script)).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split('#').next().unwrap_or("");
            assert!(
                !(code.contains('|') && code.contains("head ")),
                "{script}:{}: a pipe into head can end a green run with SIGPIPE: {line}",
                n + 1
            );
        }
    }
}
