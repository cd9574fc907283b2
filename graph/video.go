package graph

import (
	"context"

	"studio/models"
)

// VideoTask answers one video task of the caller (GET /api/videos?id=).
func (r *queryResolver) VideoTask(ctx context.Context, taskID string) (*models.VideoTaskView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	t, err := r.svc.Videos().VideoTaskFor(ctx, id, taskID)
	if err != nil {
		return nil, err
	}
	v := t.View()
	return &v, nil
}

// VideoTasks answers a page of the caller's video tasks (GET /api/videos).
func (r *queryResolver) VideoTasks(ctx context.Context, pageNum *int, pageSize *int, status *string) (*models.VideoTaskPage, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	num, size := 1, models.VideoPageSizeDefault
	if pageNum != nil {
		num = *pageNum
	}
	if pageSize != nil {
		size = *pageSize
	}
	return r.svc.Videos().VideoTasks(ctx, id, deref(status), num, size)
}

// SubmitVideo submits a video task (POST /api/videos).
func (r *mutationResolver) SubmitVideo(ctx context.Context, input models.VideoRequest) (*models.VideoTaskView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	t, err := r.svc.Videos().SubmitVideo(ctx, id, input)
	if err != nil {
		return nil, err
	}
	v := t.View()
	return &v, nil
}

// CancelVideo cancels a video task and refunds it (DELETE /api/videos).
func (r *mutationResolver) CancelVideo(ctx context.Context, taskID string) (*models.VideoTaskView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	t, err := r.svc.Videos().CancelVideo(ctx, id, taskID)
	if err != nil {
		return nil, err
	}
	v := t.View()
	return &v, nil
}

// VideoURL is the result link, null until the task is done.
func (r *videoTaskResolver) VideoURL(_ context.Context, v *models.VideoTaskView) (*string, error) {
	return optional(v.VideoURL), nil
}

// VideoProgress streams one video task: its current state first, then each change until it ends.
func (r *subscriptionResolver) VideoProgress(ctx context.Context, taskID string) (<-chan *models.VideoTaskView, error) {
	return setup(ctx, r.Resolver, func() (<-chan *models.VideoTaskView, error) {
		id, err := r.caller(ctx)
		if err != nil {
			return nil, err
		}
		if err := r.holdSubscription(ctx); err != nil {
			return nil, err
		}
		return r.svc.Videos().FollowVideo(ctx, id, taskID)
	})
}

// Status is the task's status (models.VideoStatus) as the schema's String.
func (r *videoTaskResolver) Status(_ context.Context, v *models.VideoTaskView) (string, error) {
	return string(v.Status), nil
}
