package host

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// defaultDebounce is how long the file watcher waits for a file to settle: long enough to
// cover an editor's truncate-write-rename or a cp of a few MB, short enough that a new
// version serves within a second.
const defaultDebounce = 250 * time.Millisecond

// watchFiles watches the config file, every binding's module file and every plugin binary
// and reloads what changed. It watches the directories, not the files: editors and deploy
// tools replace a file by renaming a new one over it, which a watch on the old inode would
// miss. Events on a file are debounced; then ReloadAll re-reads everything and compares
// digests, so an event that changed nothing (touch, chmod, a write of the same bytes) does
// nothing. stop waits for a reload in progress.
//
// Files reached through symlinks are watched at both ends, and any event in a directory
// holding one of those symlinks counts as a change: a Kubernetes ConfigMap or Secret mount
// (config.yaml -> ..data/config.yaml, ..data -> ..2024_01_01_xxx) is updated by renaming a
// new ..data symlink over the old one, which names neither the file nor its target.
func (h *Host) watchFiles(ctx context.Context) (stop func()) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		h.log.Warn("file watcher off: module and config changes need SIGHUP or POST /v1/reload", "err", err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	fw := &fileWatcher{h: h, w: w, dirs: map[string]bool{}, kick: make(chan struct{}, 1)}
	fw.refresh()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); fw.events(ctx) }()
	go func() { defer wg.Done(); fw.reloads(ctx) }()
	return func() {
		cancel()
		_ = w.Close()
		wg.Wait()
	}
}

type fileWatcher struct {
	h    *Host
	w    *fsnotify.Watcher
	kick chan struct{} // a watched file settled: reload

	mu    sync.Mutex
	files map[string]bool // cleaned absolute paths, and the paths they resolve to
	links map[string]bool // directories holding a symlink on the way to a watched file
	dirs  map[string]bool // directories watched
}

// refresh watches the files the host uses now (a config reload may change them).
func (fw *fileWatcher) refresh() {
	h := fw.h
	files, links := map[string]bool{}, map[string]bool{}
	add := func(p string) {
		if p == "" {
			return
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return
		}
		abs = filepath.Clean(abs)
		files[abs] = true
		// Resolved again on every refresh (after each reload): a swapped symlink points
		// somewhere new.
		if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
			files[real] = true
			for _, d := range symlinkDirs(abs) {
				links[d] = true
			}
		}
	}
	add(h.cfg.File)
	for _, b := range h.bindings() {
		add(h.cfg.ModulePath(b.cfg.Module))
		for _, np := range b.plugins {
			add(np.path)
		}
	}
	want := maps.Clone(links)
	for f := range files {
		want[filepath.Dir(f)] = true
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.files, fw.links = files, links
	for d := range want {
		if fw.dirs[d] {
			continue
		}
		if err := fw.w.Add(d); err != nil {
			h.log.Warn("cannot watch directory; changes there need SIGHUP or POST /v1/reload", "dir", d, "err", err)
			continue
		}
		fw.dirs[d] = true
	}
	// A swapped symlink's old target directory is usually deleted; drop its watch (and any
	// other no longer needed) so the watcher does not keep stale ones.
	for d := range fw.dirs {
		if !want[d] {
			_ = fw.w.Remove(d) // fails when the directory is gone, which removed the watch already
			delete(fw.dirs, d)
		}
	}
}

// symlinkDirs returns the directories holding a symlink among path and its parents: an
// event in one of them may have re-pointed path.
func symlinkDirs(path string) []string {
	var out []string
	for p := path; ; {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			out = append(out, filepath.Dir(p))
		}
		parent := filepath.Dir(p)
		if parent == p {
			return out
		}
		p = parent
	}
}

// watched reports whether an event on name may change a watched file: name is one, or
// sits in a directory holding a symlink on the way to one.
func (fw *fileWatcher) watched(name string) bool {
	abs, err := filepath.Abs(name)
	if err != nil {
		return false
	}
	abs = filepath.Clean(abs)
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.files[abs] || fw.links[filepath.Dir(abs)]
}

// events debounces: each event on a watched file pushes the deadline back, so a file
// written in several steps is read once, after the last one.
func (fw *fileWatcher) events(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case ev, ok := <-fw.w.Events:
			if !ok {
				return
			}
			if !fw.watched(ev.Name) {
				continue
			}
			timer.Reset(fw.h.debounce)
			pending = true
		case <-timer.C:
			if pending {
				pending = false
				select {
				case fw.kick <- struct{}{}:
				default: // a reload is already queued; it will read the latest bytes
				}
			}
		case err, ok := <-fw.w.Errors:
			if !ok {
				return
			}
			fw.h.log.Warn("file watcher error", "err", err)
		}
	}
}

func (fw *fileWatcher) reloads(ctx context.Context) {
	// Files may have changed before the watch began: New read them, then built the bindings
	// (seconds for a big start), and /readyz answers 200 from the end of New on, before Run
	// starts this watcher; an edit in that gap made no event and was missed until the next
	// one (TestConfigReloadFailureVisible under load). So one look, once the files had a
	// debounce to settle, unless an event's reload comes first: a reload compares digests,
	// and a look that finds nothing changed does nothing, not even move the config reload's
	// success time.
	select {
	case <-ctx.Done():
		return
	case <-fw.kick:
		fw.reload(ctx)
	case <-time.After(fw.h.debounce):
		if _, err := fw.h.reloadAll(ctx, true); err != nil && ctx.Err() == nil {
			fw.h.log.Warn("reload of files changed while the host started failed in part; what failed keeps its previous version", "err", err)
		}
		fw.refresh()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-fw.kick:
			fw.reload(ctx)
		}
	}
}

// reload reloads after a watched file changed.
func (fw *fileWatcher) reload(ctx context.Context) {
	fw.h.log.Info("watched file changed: reloading")
	if _, err := fw.h.ReloadAll(ctx); err != nil {
		fw.h.log.Warn("reload after a file change failed in part; what failed keeps its previous version", "err", err)
	}
	fw.refresh()
}
