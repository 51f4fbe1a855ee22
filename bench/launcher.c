/* launcher OUT COMMAND ARGS...: run COMMAND, write "<peak RSS KiB> <wall ns>" to OUT.
 *
 * Why not just wait4 from Python: on Linux a child's ru_maxrss includes the RSS of the process
 * it was forked from (exec charges the old address space's high-water mark), so every child of
 * the benchmark would report at least the benchmark's own ~25 MiB. Forked from this tiny
 * program instead, the figure is the command's own. The clock runs from just before fork to
 * just after the child is reaped, so this program's own start-up is not counted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: launcher OUT COMMAND [ARGS...]\n");
        return 127;
    }
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 127;
    }
    if (pid == 0) {
        execvp(argv[2], &argv[2]);
        perror(argv[2]);
        _exit(127);
    }
    int status = 0;
    struct rusage usage;
    if (wait4(pid, &status, 0, &usage) < 0) {
        perror("wait4");
        return 127;
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    long long ns = (long long)(end.tv_sec - start.tv_sec) * 1000000000LL
                   + (end.tv_nsec - start.tv_nsec);
    FILE *out = fopen(argv[1], "w");
    if (out == NULL) {
        perror(argv[1]);
        return 127;
    }
    fprintf(out, "%ld %lld\n", usage.ru_maxrss, ns);
    fclose(out);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 127;
}
