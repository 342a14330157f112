/* A program of another project: it includes the installed dfccl.h and links the installed libdfccl.so. It checks
 * the version and an error string, and that a call with a bad argument names it (no GPU is needed). */
#include <dfccl.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  int version = 0;
  if (dfcclGetVersion(&version) != dfcclSuccess || version != DFCCL_VERSION_CODE) {
    fprintf(stderr, "consumer: dfcclGetVersion gave %d, the header says %d\n", version, DFCCL_VERSION_CODE);
    return 1;
  }
  if (dfcclCommCount(NULL, NULL) != dfcclInvalidArgument || strstr(dfcclGetLastError(NULL), "comm") == NULL) {
    fprintf(stderr, "consumer: a NULL communicator was not refused by name: '%s'\n", dfcclGetLastError(NULL));
    return 1;
  }
  printf("consumer: DFCCL %d, %s\n", version, dfcclGetErrorString(dfcclInvalidArgument));
  return 0;
}
