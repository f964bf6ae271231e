package reader

// hooks are the points at which a test stops the engine to arrange a
// race; Reader.hooks is nil in production, and a nil *hooks (or a nil
// field) does nothing. A test sets them before the reads it arranges.
type hooks struct {
	// beforeSplit runs when a part fetch has decided to split, before it
	// submits its ranges.
	beforeSplit func()
	// afterPublish runs when a part fetch has published its bytes or
	// error, before it is stored.
	afterPublish func(*partCall)
	// afterStart runs when a reader has started the fetch it waits for.
	afterStart func()
	// beforeSubmit runs when a new call is in flight, before its task
	// exists.
	beforeSubmit func(*partCall)
}

func (h *hooks) split() {
	if h != nil && h.beforeSplit != nil {
		h.beforeSplit()
	}
}

func (h *hooks) published(call *partCall) {
	if h != nil && h.afterPublish != nil {
		h.afterPublish(call)
	}
}

func (h *hooks) started() {
	if h != nil && h.afterStart != nil {
		h.afterStart()
	}
}

func (h *hooks) submitting(call *partCall) {
	if h != nil && h.beforeSubmit != nil {
		h.beforeSubmit(call)
	}
}
