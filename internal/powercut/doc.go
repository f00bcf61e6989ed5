// Package powercut is a FUSE filesystem for tests that simulates the loss
// of power: what a program wrote and did not make durable is gone when
// the test cuts the power.
//
// It passes every operation through to a backing directory, and records
// what each file and directory held at its last fsync: a file's content
// at its last fsync or fdatasync, a directory's entries (creates,
// renames, links, unlinks) at its last directory fsync. A test kills the
// programs that use the mount with SIGKILL, then calls FS.Cut, which
// unmounts, rolls every file and directory back to its last synced state
// and mounts again. Unsynced writes are lost, and unsynced creates and
// renames vanish. With Options.KeepPrefix a random prefix of the unsynced
// writes survives, in the order they were made, the last one possibly
// torn at a 512-byte sector, as a real disk may leave it; the seed is
// logged so that a run can be replayed.
//
// How it keeps track:
//   - Before the first write to a block of a file since its last fsync,
//     the block's synced bytes are saved (an undo log); the cut writes
//     them back and truncates the file to its synced size. A file created
//     since is rolled back to empty. Costs follow the unsynced writes,
//     not the file sizes.
//   - Before the first change to a directory since its last fsync, its
//     listing (name -> inode) is saved. A file that loses its last synced
//     name keeps a hard link in a limbo directory beside the mounted one,
//     so that the cut can give it its name back.
//   - fsync and fdatasync are recorded, not passed through: durability is
//     what the layer simulates, and the test runs faster without them.
//     sync_file_range has no FUSE operation; it makes nothing durable
//     anyway.
//   - Files are opened with FOPEN_DIRECT_IO, so that every write reaches
//     the layer when it is made and reads see the backing file, except
//     SQLite's "-shm" files, which SQLite maps with mmap (direct I/O would
//     forbid it). The shared memory needs no durability: SQLite rebuilds
//     it from the WAL when the first connection opens the database.
//   - POSIX and flock locks are left to the kernel (the mount does not ask
//     for them), which keeps them correct between the processes that use
//     the mount.
//   - The cut unmounts, which drops every page and attribute the kernel
//     cached, as a reboot would.
//
// Limits: renaming a directory fails with EXDEV (no caller under test
// does it); the kept prefix covers file content, not directory changes;
// content and directory changes are not ordered against each other.
//
// The process that serves the mount (the test) must not map files of it,
// as SQLite does with its shared memory: a page fault on such a mapping
// waits for this process's own FUSE server, which may need the memory
// lock the fault holds, and both hang. Open stores through the backing
// directory instead (FS.CutAndCheck, or after FS.Close). Child processes
// may map what they like. A test process killed while the mount is up
// leaves it behind, answering ENOTCONN; `umount -l` removes it.
//
// It is test-only code.
package powercut
