//go:build !unix

package filetransfer

// noFollow is 0 where the system has no O_NOFOLLOW: openRegular's lstat
// before the open refuses a link found there, but one swapped in between
// that lstat and the open is followed.
const noFollow = 0
