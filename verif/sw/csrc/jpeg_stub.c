/* Linked instead of libjpeg when the machine has none (verif/sw/build.py): NVIDIA's bundled
 * umd/external/libjpeg.a is built for ARM. The runtime application calls these only for a
 * .jpg input image (umd/apps/runtime/DlaImageUtils.cpp JPEG2DIMG); they end the program with
 * one line instead. */
#include <stdio.h>
#include <stdlib.h>

static void no_jpeg(void)
{
    fprintf(stderr, "nvdla-sw: JPEG input needs libjpeg (Debian: apt-get install "
            "libjpeg62-turbo-dev, then rebuild); use a .pgm image\n");
    exit(2);
}

void *jpeg_std_error(void *err) { (void)err; no_jpeg(); return NULL; }
void jpeg_CreateDecompress(void) { no_jpeg(); }
void jpeg_stdio_src(void) { no_jpeg(); }
int jpeg_read_header(void) { no_jpeg(); return 0; }
int jpeg_start_decompress(void) { no_jpeg(); return 0; }
unsigned jpeg_read_scanlines(void) { no_jpeg(); return 0; }
int jpeg_finish_decompress(void) { no_jpeg(); return 0; }
