package models

import (
	"context"
	"sync"
)

// groupCommit runs concurrent writes of one key together, so that a busy service commits one
// transaction (or one statement) for many callers instead of one each. The first caller of a key
// becomes the leader: it commits everything queued behind it, batch after batch, until its own item is
// done, then hands the rest to a new leader, so that under steady load no caller waits for more than
// its own batch. Each item carries its own outcome, set by commit.
type groupCommit[T any] struct {
	max    int         // bound of one batch, in size units
	size   func(T) int // size of one item
	commit func(context.Context, []T)

	mu     sync.Mutex
	queues map[string]*groupQueue[T]
}

type groupQueue[T any] struct {
	pending []groupItem[T]
}

type groupItem[T any] struct {
	v    T
	done chan struct{}
}

// do queues v under key and returns once a batch holding it was committed. The commit runs without
// the caller's cancellation: a caller that gives up must not abort the others' batch.
func (g *groupCommit[T]) do(ctx context.Context, key string, v T) {
	it := groupItem[T]{v: v, done: make(chan struct{})}
	g.mu.Lock()
	if g.queues == nil {
		g.queues = map[string]*groupQueue[T]{}
	}
	q := g.queues[key]
	lead := q == nil
	if lead {
		q = &groupQueue[T]{}
		g.queues[key] = q
	}
	q.pending = append(q.pending, it)
	g.mu.Unlock()
	if lead {
		g.drain(context.WithoutCancel(ctx), key, q, it.done)
	}
	<-it.done
}

// drain commits the queue's batches until own is done; what is queued after that goes to a new leader.
func (g *groupCommit[T]) drain(ctx context.Context, key string, q *groupQueue[T], own chan struct{}) {
	for {
		g.mu.Lock()
		if len(q.pending) == 0 {
			delete(g.queues, key)
			g.mu.Unlock()
			return
		}
		if own != nil && isClosed(own) {
			g.mu.Unlock()
			go g.drain(ctx, key, q, nil)
			return
		}
		n, size := 0, 0
		for n < len(q.pending) && (n == 0 || size+g.size(q.pending[n].v) <= g.max) {
			size += g.size(q.pending[n].v)
			n++
		}
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		g.mu.Unlock()
		vs := make([]T, len(batch))
		for i, it := range batch {
			vs[i] = it.v
		}
		g.commit(ctx, vs)
		for _, it := range batch {
			close(it.done)
		}
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
