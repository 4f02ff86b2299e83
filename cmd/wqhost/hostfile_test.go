package main

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

// TestHostFileNamesTheEarlierHostAgain: a second host on a data directory names itself in
// host.json while it runs, and when it stops first, the host.json names the first host
// again if it still runs (else it is removed), so the CLI keeps going through that host's
// admin API instead of opening the store beside it.
func TestHostFileNamesTheEarlierHostAgain(t *testing.T) {
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8481}
	for _, tc := range []struct {
		name     string
		earlier  int // pid in host.json before; 0: no host.json
		wantPID  int // pid in host.json after this host stops; 0: none
		wantFile bool
	}{
		{"no earlier host", 0, 0, false},
		{"earlier host still runs", sleeper.Process.Pid, sleeper.Process.Pid, true},
		{"earlier host gone", dead.Process.Pid, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.earlier != 0 {
				if err := putHostFile(dir+"/"+hostFileName, hostFile{PID: tc.earlier, Admin: "http://127.0.0.1:8480"}); err != nil {
					t.Fatal(err)
				}
			}
			remove, err := writeHostFile(dir, addr)
			if err != nil {
				t.Fatal(err)
			}
			if hf, err := readHostFile(dir); err != nil || hf.PID != os.Getpid() || hf.Admin != "http://127.0.0.1:8481" {
				t.Fatalf("while this host runs host.json holds %+v (err %v); want this process", hf, err)
			}
			remove()
			hf, err := readHostFile(dir)
			if !tc.wantFile {
				if !os.IsNotExist(err) {
					t.Fatalf("after this host stopped host.json holds %+v (err %v); want it removed", hf, err)
				}
				return
			}
			if err != nil || hf.PID != tc.wantPID || hf.Admin != "http://127.0.0.1:8480" {
				t.Fatalf("after this host stopped host.json holds %+v (err %v); want the earlier host, pid %d", hf, err, tc.wantPID)
			}
		})
	}
}
