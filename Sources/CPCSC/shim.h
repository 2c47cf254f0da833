// pcsc-lite's client library (libpcsclite-dev), for the conformance runner's PC/SC readers (conform --device pcsc:).
#include <winscard.h>
