/*
 * sample-http: the HTTP workload of localhost/pacto-sample-http:0.1 (docs/images.md), a stand-in
 * for a user's service on the project's test node.
 *
 *   GET /healthz  200 "ok", or 503 while the file /tmp/unhealthy exists (liveness)
 *   GET /readyz   200 "ok", or 503 while the file /tmp/not-ready exists (readiness)
 *   GET /metrics  200, Prometheus text exposition (text/plain; version=0.0.4): request counters
 *   anything else 404; methods other than GET and HEAD 405
 *
 * `kubectl exec POD -- touch /tmp/not-ready` makes the pod NotReady through its real readiness probe;
 * `rm` makes it Ready again. Usage: sample-http [PORT] (default 8080). Listens on IPv4 (all
 * addresses); one request per connection, served in turn; exits 0 on SIGTERM or SIGINT.
 * Built with `gcc -Os -static -s`.
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static unsigned long count_healthz, count_readyz, count_metrics, count_other;

static void on_stop(int sig)
{
	(void)sig;
	_exit(0);
}

static void reply(int fd, int head_only, const char *status, const char *type, const char *body)
{
	char header[256];
	size_t len = strlen(body);
	int n = snprintf(header, sizeof(header),
			 "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, type, len);

	if (n > 0 && write(fd, header, (size_t)n) < 0)
		return;
	if (!head_only && len > 0 && write(fd, body, len) < 0)
		return;
}

/* Reads the request head (up to a blank line, a full buffer or the receive timeout). */
static ssize_t read_head(int fd, char *buf, size_t cap)
{
	size_t used = 0;

	while (used + 1 < cap) {
		ssize_t n = read(fd, buf + used, cap - 1 - used);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		used += (size_t)n;
		buf[used] = '\0';
		if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
			break;
	}
	buf[used] = '\0';
	return (ssize_t)used;
}

static void serve(int fd)
{
	char req[4096], method[16], path[1024], body[1024];
	const char *text = "text/plain; charset=utf-8";
	int head_only;

	if (read_head(fd, req, sizeof(req)) <= 0 || sscanf(req, "%15s %1023s", method, path) != 2) {
		reply(fd, 0, "400 Bad Request", text, "bad request\n");
		return;
	}
	path[strcspn(path, "?#")] = '\0';
	head_only = strcmp(method, "HEAD") == 0;
	if (!head_only && strcmp(method, "GET") != 0) {
		reply(fd, 0, "405 Method Not Allowed", text, "method not allowed\n");
		return;
	}
	if (strcmp(path, "/healthz") == 0) {
		count_healthz++;
		if (access("/tmp/unhealthy", F_OK) == 0)
			reply(fd, head_only, "503 Service Unavailable", text, "unhealthy\n");
		else
			reply(fd, head_only, "200 OK", text, "ok\n");
	} else if (strcmp(path, "/readyz") == 0) {
		count_readyz++;
		if (access("/tmp/not-ready", F_OK) == 0)
			reply(fd, head_only, "503 Service Unavailable", text, "not ready\n");
		else
			reply(fd, head_only, "200 OK", text, "ok\n");
	} else if (strcmp(path, "/metrics") == 0) {
		count_metrics++;
		snprintf(body, sizeof(body),
			 "# HELP sample_http_requests_total HTTP requests served, by path.\n"
			 "# TYPE sample_http_requests_total counter\n"
			 "sample_http_requests_total{path=\"/healthz\"} %lu\n"
			 "sample_http_requests_total{path=\"/readyz\"} %lu\n"
			 "sample_http_requests_total{path=\"/metrics\"} %lu\n"
			 "sample_http_requests_total{path=\"other\"} %lu\n"
			 "# HELP sample_http_ready 1 while /readyz answers 200.\n"
			 "# TYPE sample_http_ready gauge\n"
			 "sample_http_ready %d\n",
			 count_healthz, count_readyz, count_metrics, count_other,
			 access("/tmp/not-ready", F_OK) != 0);
		reply(fd, head_only, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body);
	} else {
		count_other++;
		reply(fd, head_only, "404 Not Found", text, "not found\n");
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr;
	struct timeval timeout = { .tv_sec = 5, .tv_usec = 0 };
	long port = argc > 1 ? strtol(argv[1], NULL, 10) : 8080;
	int one = 1, srv;

	if (port <= 0 || port > 65535) {
		fprintf(stderr, "sample-http: invalid port '%s'\n", argv[1]);
		return 2;
	}
	signal(SIGTERM, on_stop);
	signal(SIGINT, on_stop);
	signal(SIGPIPE, SIG_IGN);

	srv = socket(AF_INET, SOCK_STREAM, 0);
	if (srv < 0) {
		perror("sample-http: socket");
		return 1;
	}
	setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_ANY);
	addr.sin_port = htons((unsigned short)port);
	if (bind(srv, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(srv, 64) < 0) {
		perror("sample-http: bind/listen");
		return 1;
	}
	printf("sample-http: listening on :%ld\n", port);
	fflush(stdout);
	for (;;) {
		int fd = accept(srv, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("sample-http: accept");
			return 1;
		}
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
		serve(fd);
		close(fd);
	}
}
