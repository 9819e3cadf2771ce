package incus

// WatcherPidFile is where the lifetime watcher records its pid in an
// instance, for the external tests.
const WatcherPidFile = watcherPidFile
