package jobstate

import "testing"

func TestStepOrder(t *testing.T) {
	for i, s := range Steps {
		if s.Order() != i {
			t.Errorf("%s.Order() = %d, want %d", s, s.Order(), i)
		}
	}
	if got := Step("bake").Order(); got != -1 {
		t.Errorf("an unknown step's Order() = %d, want -1", got)
	}
}

func TestTerminal(t *testing.T) {
	over := map[State]bool{Released: true, Rejected: true, Withdrawn: true}
	for _, s := range States {
		if s.Terminal() != over[s] {
			t.Errorf("%s.Terminal() = %v, want %v", s, s.Terminal(), over[s])
		}
	}
}
