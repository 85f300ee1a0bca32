/* The floor under the probe's CPU per allocation: what the kernel costs for the
 * same datagrams on a fresh socket, with no TURN work at all. Per iteration:
 * socket, connect, then ROUNDS times (send a STUN Binding request, receive the
 * answer), close. bench/probe runs it against the same coturn in the same run
 * and prints its user and system CPU per iteration beside the probe's.
 *
 * usage: bench_probe_floor ADDR PORT COUNT [ROUNDS]    (ROUNDS: 3, the probe's round trips) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
  if (argc < 4) {
    fprintf(stderr, "usage: %s ADDR PORT COUNT [ROUNDS]\n", argv[0]);
    return 2;
  }
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)atoi(argv[2]));
  if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
    fprintf(stderr, "bench_probe_floor: %s is not an IPv4 address\n", argv[1]);
    return 2;
  }
  long count = atol(argv[3]);
  int rounds = argc > 4 ? atoi(argv[4]) : 3;
  long answered = 0, lost = 0;
  /* a Binding request: type 0x0001, length 0, the magic cookie, a transaction id */
  uint8_t req[20] = {0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xA4, 0x42};
  for (long i = 0; i < count; i++) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {1, 0}; /* loopback loses nothing, but never hang */
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
      perror("bench_probe_floor: socket/connect");
      return 1;
    }
    for (int r = 0; r < rounds; r++) {
      memcpy(req + 8, &i, sizeof(i));
      req[19] = (uint8_t)r;
      if (send(fd, req, sizeof(req), 0) < 0) {
        perror("bench_probe_floor: send");
        return 1;
      }
      uint8_t buf[1500];
      if (recv(fd, buf, sizeof(buf), 0) >= 20) answered++;
      else lost++;
    }
    close(fd);
  }
  printf("{\"iterations\":%ld,\"answered\":%ld,\"lost\":%ld}\n", count, answered, lost);
  return lost ? 1 : 0;
}
