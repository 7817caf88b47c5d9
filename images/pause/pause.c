/*
 * The pod sandbox ("pause") process of localhost/pause:3.10, the image containerd's sandbox_image
 * names on the project's test node (docs/images.md). It holds the pod's namespaces open: it sleeps in
 * pause(), reaps every child re-parented to it (it is PID 1 when the pod shares its PID namespace),
 * and exits 0 on SIGTERM or SIGINT. Built with `gcc -Os -static -s`; needs nothing else in the image.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig)
{
	(void)sig;
	_exit(0);
}

static void on_child(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

static int handle(int sig, void (*fn)(int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sa.sa_flags = (sig == SIGCHLD) ? SA_NOCLDSTOP | SA_RESTART : 0;
	sigemptyset(&sa.sa_mask);
	return sigaction(sig, &sa, NULL);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "-v") == 0) {
		puts("pause 3.10 (pacto)");
		return 0;
	}
	if (getpid() != 1)
		fputs("pause: warning: not running as PID 1\n", stderr);
	if (handle(SIGTERM, on_stop) || handle(SIGINT, on_stop) || handle(SIGCHLD, on_child)) {
		perror("pause: sigaction");
		return 1;
	}
	for (;;)
		pause();
}
