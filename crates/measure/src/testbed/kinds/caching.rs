//! The `caching` kind: NDN with in-network caches against HTTP (nginx) and FTP (vsftpd) over the same links.

use super::*;

// Not 8080: the daemon's own HTTP gateway listens there.
const NGINX_PORT: u16 = 18080;
const FTP_PORT: u16 = 2121;
const PASV: [u16; 4] = [30000, 30001, 30002, 30003];

fn start_nginx(net: &mut Net, node: &str, root: &Path, work: &Path) -> anyhow::Result<()> {
    let conf = work.join("nginx.conf");
    let w = work.display();
    std::fs::write(
        &conf,
        format!(
            "worker_processes 1;\npid {w}/nginx.pid;\nerror_log {w}/nginx-error.log;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n access_log off;\n client_body_temp_path {w}/nginx-body;\n \
             proxy_temp_path {w}/nginx-proxy;\n fastcgi_temp_path {w}/nginx-fcgi;\n \
             uwsgi_temp_path {w}/nginx-uwsgi;\n scgi_temp_path {w}/nginx-scgi;\n sendfile on;\n \
             server {{ listen 127.0.0.1:{NGINX_PORT}; root {}; }}\n}}\n",
            root.display()
        ),
    )?;
    let nginx = ["/usr/sbin/nginx", "nginx"]
        .into_iter()
        .find(|p| Path::new(p).exists() || which(p))
        .ok_or_else(|| {
            anyhow::anyhow!("nginx is missing (scripts/setup-test-deps.sh installs it)")
        })?;
    let mut c = net.in_node(node, nginx);
    c.arg("-c")
        .arg(&conf)
        .args(["-g", "daemon off;"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    net.tb.spawn(c)?;
    Ok(())
}

fn which(p: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {p}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn start_vsftpd(
    net: &mut Net,
    node: &str,
    root: &Path,
    work: &Path,
    advertised: std::net::Ipv4Addr,
) -> anyhow::Result<()> {
    let empty = work.join("vsftpd-empty");
    std::fs::create_dir_all(&empty)?;
    let conf = work.join("vsftpd.conf");
    std::fs::write(
        &conf,
        format!(
            "listen=YES\nlisten_ipv6=NO\nlisten_address=127.0.0.1\nlisten_port={FTP_PORT}\n\
             background=NO\nanonymous_enable=YES\nno_anon_password=YES\nanon_root={}\n\
             local_enable=NO\nwrite_enable=NO\nallow_writeable_chroot=YES\n\
             run_as_launching_user=YES\nseccomp_sandbox=NO\nsecure_chroot_dir={}\n\
             pasv_enable=YES\npasv_min_port={}\npasv_max_port={}\npasv_address={advertised}\n\
             pasv_promiscuous=YES\nxferlog_enable=NO\nvsftpd_log_file={}/vsftpd.log\n",
            root.display(),
            empty.display(),
            PASV[0],
            PASV[PASV.len() - 1],
            work.display()
        ),
    )?;
    let bin = ["/usr/sbin/vsftpd"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .ok_or_else(|| {
            anyhow::anyhow!("vsftpd is missing (scripts/setup-test-deps.sh installs it)")
        })?;
    let mut c = net.in_node(node, bin);
    c.arg(&conf).stdout(Stdio::null()).stderr(Stdio::inherit());
    net.tb.spawn(c)?;
    Ok(())
}

/// Waits until a server started in `node` answers `url` on its loopback
/// (the relay in front of it would otherwise accept a client, fail to reach
/// the server and close: curl's "response reading failed").
fn wait_ready(net: &Net, node: &str, url: &str) -> anyhow::Result<()> {
    let t = Instant::now();
    loop {
        let mut c = net.in_node(node, "curl");
        c.args(["-sS", "-o", "/dev/null", "--max-time", "2", url]);
        let o = c.output().context("running curl (apt-get install curl)")?;
        if o.status.success() {
            return Ok(());
        }
        if t.elapsed() > Duration::from_secs(10) {
            anyhow::bail!(
                "the server in {node} does not answer {url}: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// curl inside `node`: (seconds, bytes).
fn curl(net: &Net, node: &str, url: &str) -> anyhow::Result<(f64, u64)> {
    // Servers may take a moment to listen: retry connection refusals.
    for attempt in 0..50 {
        let mut c = net.in_node(node, "curl");
        c.args([
            "-sS",
            "--disable-epsv",
            "-o",
            "/dev/null",
            "-w",
            "%{time_total} %{size_download}",
            url,
        ]);
        let o = c.output().context("running curl (apt-get install curl)")?;
        let err = String::from_utf8_lossy(&o.stderr);
        if o.status.success() {
            let s = String::from_utf8_lossy(&o.stdout);
            let mut it = s.split_whitespace();
            let secs = it.next().and_then(|x| x.parse().ok()).unwrap_or(f64::NAN);
            let bytes = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            return Ok((secs, bytes));
        }
        if attempt < 49 && (err.contains("onnect") || err.contains("refused")) {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        anyhow::bail!("curl {url} in {node}: {}", err.trim());
    }
    unreachable!()
}

pub(super) fn caching(e: &Experiment, work: &Path) -> anyhow::Result<Outcome> {
    let p = the_publisher(e)?;
    let file_bytes = size(p.size.as_deref().unwrap_or("64MiB"))?;
    let gateway = param_str(e, "gateway", "gateway");
    let seg = param_int(e, "segment_size", 8192);
    let pipeline = param_str(e, "pipeline", "cubic");
    if e.consumer.is_empty() {
        anyhow::bail!("caching needs [[consumer]]s");
    }
    let methods: Vec<String> = if e.baseline.is_empty() {
        vec![
            "ndn-nocache".into(),
            "ndn-cache".into(),
            "http".into(),
            "ftp".into(),
        ]
    } else {
        e.baseline.iter().map(|b| b.name.clone()).collect()
    };
    for m in &methods {
        if !["ndn-nocache", "ndn-cache", "http", "ftp"].contains(&m.as_str()) {
            anyhow::bail!("caching baseline {m:?}: expected ndn-nocache, ndn-cache, http or ftp");
        }
    }
    let packets = file_bytes / seg.max(1) as u64 + 16;
    let max_packet = (seg as u64 + 2048).max(8800).to_string();
    let gw = gateway.clone();
    let mut net = Net::build(e, work, "caching", &|n| {
        let mut a = vec!["--max-packet".to_string(), max_packet.clone()];
        if n == gw {
            a.extend(["--cs-capacity".into(), (packets * 2).to_string()]);
        }
        a
    })?;
    net.route_to(&p.prefix, std::slice::from_ref(&p.node))?;
    net.ip_routing()?;
    let root = work.join("www");
    std::fs::create_dir_all(&root)?;
    let file = root.join("dataset.bin");
    granary_store::chunking::write_noise(&file, file_bytes, 3)?;
    // NDN: the origin's repository serves the same bytes.
    let seg_s = seg.to_string();
    let mut t = Table::new(&[
        "method",
        "consumer",
        "order",
        "seconds",
        "bytes",
        "throughput_mbps",
    ]);
    let tcp_addr = if methods.iter().any(|m| m == "http" || m == "ftp") {
        let mut ports = vec![NGINX_PORT, FTP_PORT];
        ports.extend(PASV);
        Some(net.tcp_path(&gateway, &p.node, &ports)?)
    } else {
        None
    };
    for (mi, m) in methods.iter().enumerate() {
        eprintln!("testbed: caching: {m}");
        let name = format!("{}/{m}", p.prefix);
        match m.as_str() {
            "ndn-nocache" | "ndn-cache" => {
                net.cli(
                    &p.node,
                    &[
                        "put",
                        file.to_str().context("path")?,
                        &name,
                        "--segment-size",
                        &seg_s,
                        "--sign",
                        "digest",
                    ],
                )?;
                let admit = if m == "ndn-cache" { "on" } else { "off" };
                net.cli(&gateway, &["cs", "config", "--admit", admit])?;
            }
            "http" => {
                start_nginx(&mut net, &p.node, &root, work)?;
                wait_ready(&net, &p.node, &format!("http://127.0.0.1:{NGINX_PORT}/"))?;
            }
            "ftp" => {
                let a = tcp_addr.context("tcp path")?;
                start_vsftpd(&mut net, &p.node, &root, work, a)?;
                wait_ready(&net, &p.node, &format!("ftp://127.0.0.1:{FTP_PORT}/"))?;
            }
            _ => {}
        }
        for (i, c) in e.consumer.iter().enumerate() {
            let (secs, bytes) = match m.as_str() {
                "http" => curl(
                    &net,
                    &c.node,
                    &format!(
                        "http://{}:{NGINX_PORT}/dataset.bin",
                        tcp_addr.context("tcp")?
                    ),
                )?,
                "ftp" => curl(
                    &net,
                    &c.node,
                    &format!("ftp://{}:{FTP_PORT}/dataset.bin", tcp_addr.context("tcp")?),
                )?,
                _ => {
                    let dest = work.join(format!("caching-{mi}-{i}.bin"));
                    let (secs, v) =
                        get(&net, &c.node, &name, &dest, &["--pipeline-type", &pipeline])?;
                    let ok = std::fs::metadata(&dest).map(|m| m.len()).unwrap_or(0) == file_bytes;
                    let _ = std::fs::remove_file(&dest);
                    if !ok {
                        anyhow::bail!("{name} on {}: wrong size", c.node);
                    }
                    (secs, v["stats"]["bytes"].as_u64().unwrap_or(file_bytes))
                }
            };
            if bytes != file_bytes {
                anyhow::bail!("{m} on {}: got {bytes} of {file_bytes} bytes", c.node);
            }
            t.push(vec![
                m.clone(),
                c.node.clone(),
                (i + 1).to_string(),
                format!("{secs:.2}"),
                bytes.to_string(),
                format!("{:.2}", bytes as f64 * 8.0 / secs / 1e6),
            ]);
        }
    }
    drop(net);
    let mut series: Vec<Series> = Vec::new();
    for r in &t.rows {
        let pt = (t.f(r, "order"), t.f(r, "throughput_mbps"));
        match series.iter_mut().find(|s| s.label == r[0]) {
            Some(s) => s.points.push(pt),
            None => series.push(Series {
                label: r[0].clone(),
                points: vec![pt],
            }),
        }
    }
    let mean = |m: &str, from: f64| {
        let v: Vec<f64> = t
            .rows
            .iter()
            .filter(|r| r[0] == m && t.f(r, "order") >= from)
            .map(|r| t.f(r, "throughput_mbps"))
            .collect();
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let total = |m: &str| -> f64 {
        t.rows
            .iter()
            .filter(|r| r[0] == m)
            .map(|r| t.f(r, "seconds"))
            .sum()
    };
    let mut comparison = String::from(
        "| method | mean throughput, 4 consumers (Mbit/s) | consumers 2–4 (Mbit/s) | total time (s) |\n|---|---|---|---|\n",
    );
    for m in &methods {
        comparison += &format!(
            "| {m} | {:.1} | {:.1} | {:.2} |\n",
            mean(m, 1.0),
            mean(m, 2.0),
            total(m)
        );
    }
    let c = mean("ndn-cache", 1.0);
    let _ = write!(
        comparison,
        "\nNDN with the gateway's cache over HTTP: {:.1}× (mean over the 4 consumers), {:.1}× for consumers 2–4; \
         over FTP: {:.1}× / {:.1}×; over NDN without cache: {:.1}×. The seed reports 4.5–6.5× for NDN caching over \
         FTP/HTTP/ESGF at 1.5 MB packets (Fig. 4d). Here the first consumer pays the WAN like everyone else and \
         consumers 2–4 fetch from the gateway at LAN speed, so the ratio grows with the WAN's RTT × rate and \
         shrinks with the consumer's own per-packet cost; the seed's ratio is of the same kind (its remote fetch \
         ran at 140–150 Mbit/s without TCP tuning). HTTP and FTP here go through a TCP relay that terminates the \
         connection (no slow start over the emulated path, no loss), which favours them.",
        c / mean("http", 1.0),
        mean("ndn-cache", 2.0) / mean("http", 2.0),
        c / mean("ftp", 1.0),
        mean("ndn-cache", 2.0) / mean("ftp", 2.0),
        c / mean("ndn-nocache", 1.0),
    );
    Ok(Outcome {
        tables: vec![("caching", t)],
        plots: vec![(
            "throughput",
            Plot {
                title: "throughput per consumer, fetching one after another".into(),
                x_label: "consumer (order of fetching)".into(),
                y_label: "throughput, Mbit/s".into(),
                log_x: false,
                series,
            },
        )],
        comparison,
        notes: format!(
            "One {file_bytes}-byte file. NDN: the origin's repository (`granary put --segment-size {seg} --sign digest`), \
             `granary get --pipeline-type {pipeline}` on each consumer's node, the gateway's CS admitting \
             (ndn-cache) or not (ndn-nocache). HTTP: nginx (sendfile) inside the origin's namespace; FTP: vsftpd \
             (passive mode) inside it; both fetched with curl inside each consumer's namespace over static IP \
             routes through the gateway, the WAN's delay and rate applied by a TCP relay (`granary linkem --tcp`)."
        ),
    })
}
