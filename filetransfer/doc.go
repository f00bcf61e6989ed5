// Package filetransfer holds the parts of Petrel's file transfer that
// touch files and nothing else: describing and reading the file to send
// (Describe, Source), spooling a file being received so that it survives
// broken links and restarts and is delivered whole or not at all (Spool,
// Incoming), and watching outbox folders for files to send (Outbox).
// Moving chunks over sessions, the file messages themselves and the
// wiring into a node are done above it, with these pieces.
//
// # A transfer
//
// The sender describes the file (Describe: name, size, SHA-256, read
// once) and announces it in a file message. The receiver opens the
// transfer in its spool (Spool.Begin) and tells the sender where to start
// (Incoming.Offset: 0, or where an earlier attempt got to). The sender
// reads chunks from that offset (Source.ReadChunk), checks its file has
// not changed after each batch (Source.Verify), and the receiver appends
// them (Incoming.Write), makes them durable (Incoming.Sync) and only then
// acknowledges them. At the end the receiver verifies and delivers the
// file (Incoming.Complete) and only then announces it to the consumers.
// A sender may also announce the file before it has hashed it
// (DescribeLater, then DescribeMatching): its checksum then follows the
// last byte (Info.Pending, Incoming.SetChecksum), and the invariants below
// keep custody where it was.
//
// # Spool layout
//
//	<spool>/<id>.part        the bytes received, opened write-only
//	<spool>/<id>.state       JSON: the Info, the durable offset and the
//	                         marshaled SHA-256 state at that offset
//	<spool>/<id>.state.tmp   only while the state is being replaced
//	<dest>/.petrel-<id>.tmp  only while a file is copied to another
//	                         filesystem at delivery
//
// # Invariants
//
//   - A byte counts toward a resume only once it is durable: Sync fsyncs
//     the partial file before it writes the state that counts it (temp
//     file, fsync, rename, fsync of the directory, as nsq's diskqueue
//     does; the partial file's name is made durable when it is created).
//     Every checkpoint's rename is durable: were it left to the kernel, a
//     power loss could keep only the first state, and the transfer would
//     start again from 0. After a crash or a power loss the transfer
//     resumes at the durable offset; bytes written past it are cut off.
//   - Writing never waits for hashing: the running SHA-256 is computed by
//     one goroutine per open transfer, beside the writes, and caught up
//     with before any checkpoint or delivery reads it. On Linux the
//     partial file is written with O_DIRECT where its filesystem takes it,
//     for every chunk whose offset and length are multiples of 4 KiB (a
//     chunk in an unaligned buffer is copied into an aligned one first):
//     the bytes go to the disk without a page cache copy, whose pages cost
//     more CPU than the write on a virtual machine that returns freed
//     memory to its host. The first chunk that does not fit (a file's
//     last, or any at a chunk size that is not a multiple of 4 KiB), and a
//     Follower, turn it off: from there the writes go through the page
//     cache, and their writeback is started every MiB (sync_file_range),
//     so a checkpoint's fsync finds little to flush. Either way the bytes
//     are durable only once a checkpoint's fsync returns.
//   - A resume never reads the partial file: the running SHA-256 is
//     restored from the state. The cost is that damage done to the partial
//     file at rest, after it was written, is not seen; the next hop's
//     check, or the consumer's, is what catches that.
//   - A Follower (Incoming.Follow), which a relay forwards from while it
//     still receives the file, reads only bytes below the durable offset:
//     what it hands on survives a crash of this node. What it has read
//     leaves the page cache at once (those bytes are durable, so their
//     pages are clean): the file's next writes reuse those pages instead of
//     taking fresh ones, which cost a relay about 2 s of CPU per GiB on a
//     virtual machine that returns freed memory to its host.
//   - A file is delivered only when its size and SHA-256 are the announced
//     ones. A corrupt file is removed from the spool, never delivered.
//   - A file may be announced before its sender hashed it: its checksum
//     follows the last byte (Info.Pending, Incoming.SetChecksum). Until it
//     arrives the durable offset stays below the size, in memory and in
//     the state, so that no resume can find a whole file it could not
//     verify; the last bytes become durable in Deliver, after the match.
//     Check stays strict; only an announcement (CheckAnnounced) and a
//     state may lack the checksum, and only for a file with content.
//   - A partial file is never visible under its final name: it lives in the
//     spool under its id and reaches the destination folder in one step (a
//     hard link, after a copy to a hidden temp name when the folder is on
//     another filesystem).
//   - Delivery never replaces a file: a name in use gets " (1)", " (2)"...
//     and two deliveries racing for one name get two names. A Complete run
//     again after a crash finds what it delivered and does not deliver it
//     twice.
//   - A full filesystem is an error wrapping ErrSpoolFull, never damage:
//     the durable offset stays, and the transfer goes on from it once there
//     is room again. Spool space is freed when a transfer completes, fails
//     its checksum or is aborted.
//   - With a Quota (SetQuota, BeginFor), a transfer counts for its whole
//     announced size from Begin until it leaves the spool, so transfers
//     admitted together can all complete; one that would go past the
//     quota, or its peer's share, is not begun (ErrSpoolQuota).
//   - Names from the network are checked before they touch a path
//     (CheckName, CheckID): nothing is written outside the spool and the
//     destination folder.
//   - A sender's file that changes while it is sent fails the transfer
//     with ErrSourceChanged and says what changed.
//   - An outbox offers a file once it is complete by one of two documented
//     conventions (see Outbox), once per file, and never a ".part" file.
//     Its one goroutine stops in Close.
//
// filetransfer imports the standard library, message and fsnotify (only
// it and conf import fsnotify). It must not import queue: its state lives
// in files, beside the data, so that the two cannot disagree after a
// crash. Nor does it import session, sender, receiver, conf or the root
// package, which build on it.
package filetransfer
