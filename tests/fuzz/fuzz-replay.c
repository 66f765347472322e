/* Runs the fuzz target once over each file named on the command line: the
 * committed seed corpus doubles as a regression test in every build, with or
 * without clang's libFuzzer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        uint8_t *buf;
        long n;

        if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
            perror(argv[i]);
            return EXIT_FAILURE;
        }
        buf = malloc((size_t)n + 1);
        if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
            perror(argv[i]);
            return EXIT_FAILURE;
        }
        fclose(f);
        LLVMFuzzerTestOneInput(buf, (size_t)n);
        free(buf);
        printf("ok %s (%ld bytes)\n", argv[i], n);
    }
    return EXIT_SUCCESS;
}
