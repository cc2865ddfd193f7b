# Sourced by the gateway benchmarks: nginx (Debian's) on loopback, serving ROOT, with a
# temporary configuration in DIR (sendfile on, keep-alive without a request limit).
#   nginx_start DIR ROOT PORT [EXTRA]   EXTRA: more lines inside `http { }` (a TLS server)
# Its pid file is DIR/nginx.pid; `kill "$(cat DIR/nginx.pid)"` stops it.
nginx_start() {
  local dir=$1 root=$2 port=$3 extra=${4:-}
  local bin
  bin=$(command -v nginx || echo /usr/sbin/nginx)
  [ -x "$bin" ] || { echo "nginx missing: run scripts/setup-test-deps.sh (apt nginx)" >&2; return 1; }
  mkdir -p "$dir"
  cat > "$dir/nginx.conf" <<CONF
daemon on;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 64; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  keepalive_requests 100000;
  server { listen 127.0.0.1:$port; root $root; }
$extra
}
CONF
  "$bin" -c "$dir/nginx.conf" -p "$dir" -e "$dir/error.log"
  for _ in $(seq 100); do [ -f "$dir/nginx.pid" ] && return 0; sleep 0.05; done
  echo "nginx did not start: $(cat "$dir/error.log")" >&2
  return 1
}
