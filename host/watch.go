package host

import (
	"context"
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
	files map[string]bool // cleaned absolute paths
	dirs  map[string]bool
}

// refresh watches the files the host uses now (a config reload may change them).
func (fw *fileWatcher) refresh() {
	h := fw.h
	files := map[string]bool{}
	add := func(p string) {
		if p == "" {
			return
		}
		if abs, err := filepath.Abs(p); err == nil {
			files[filepath.Clean(abs)] = true
		}
	}
	add(h.cfg.File)
	for _, b := range h.bindings() {
		add(h.cfg.ModulePath(b.cfg.Module))
		for _, np := range b.plugins {
			add(np.path)
		}
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.files = files
	for f := range files {
		d := filepath.Dir(f)
		if fw.dirs[d] {
			continue
		}
		if err := fw.w.Add(d); err != nil {
			h.log.Warn("cannot watch directory; changes there need SIGHUP or POST /v1/reload", "dir", d, "err", err)
			continue
		}
		fw.dirs[d] = true
	}
}

func (fw *fileWatcher) watched(name string) bool {
	abs, err := filepath.Abs(name)
	if err != nil {
		return false
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.files[filepath.Clean(abs)]
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
	for {
		select {
		case <-ctx.Done():
			return
		case <-fw.kick:
			fw.h.log.Info("watched file changed: reloading")
			if _, err := fw.h.ReloadAll(ctx); err != nil {
				fw.h.log.Warn("reload after a file change failed in part; what failed keeps its previous version", "err", err)
			}
			fw.refresh()
		}
	}
}
