package main

import "testing"

func TestCommandName(t *testing.T) {
	for _, c := range []struct {
		command []string
		want    string
	}{
		{[]string{"python3", "train.py", "--epochs", "3"}, "train.py"},
		{[]string{"/usr/bin/python3.11", "-u", "src/train.py"}, "train.py"},
		{[]string{"python", "-m", "pkg.train", "--lr", "3e-4"}, "pkg.train"},
		{[]string{"torchrun", "--nproc_per_node", "8", "train.py"}, "train.py"},
		{[]string{"accelerate", "launch", "finetune.py"}, "finetune.py"},
		{[]string{"sh", "-c", "python3 x.py"}, "sh"},
		{[]string{"bash", "run.sh"}, "run.sh"},
		{[]string{"python3"}, "python3"},
		{[]string{"./simulate", "--seed", "4"}, "simulate"},
		{[]string{"ffmpeg", "-i", "in.py"}, "ffmpeg"},
		{[]string{"python3.evil", "x.py"}, "python3.evil"},
		{nil, ""},
	} {
		if got := commandName(c.command); got != c.want {
			t.Errorf("commandName(%q) = %q, want %q", c.command, got, c.want)
		}
	}
}
