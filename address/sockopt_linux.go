package address

// soReusePort is 0 on Linux, where SO_REUSEADDR alone lets UDP sockets
// that all set it bind one port, and each gets every broadcast. (Linux's
// SO_REUSEPORT would also balance unicast datagrams between them and tie
// the port to one user, which discovery does not want.)
const soReusePort = 0
