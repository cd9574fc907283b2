package graph

import (
	"context"

	"studio/models"
)

// Job answers one job of the caller (GET /api/jobs?id=).
func (r *queryResolver) Job(ctx context.Context, jobID string) (*models.JobView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	j, err := r.svc.Jobs().JobFor(ctx, id, jobID)
	if err != nil {
		return nil, err
	}
	v := j.View()
	return &v, nil
}

// Jobs answers a page of the caller's jobs (GET /api/jobs) as a Relay connection over the core's cursor.
func (r *queryResolver) Jobs(ctx context.Context, first *int, after *string, status *string) (*JobConnection, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	limit, err := models.JobsPageSize("first", first)
	if err != nil {
		return nil, err
	}
	page, err := r.svc.Jobs().Jobs(ctx, id, deref(status), deref(after), limit)
	if err != nil {
		return nil, err
	}
	conn := &JobConnection{Edges: make([]JobEdge, len(page.Jobs)), PageInfo: &PageInfo{}}
	for i := range page.Jobs {
		conn.Edges[i] = JobEdge{Node: &page.Jobs[i]}
	}
	if page.NextCursor != "" {
		next := page.NextCursor
		conn.PageInfo.HasNextPage, conn.PageInfo.EndCursor = true, &next
		conn.Edges[len(conn.Edges)-1].Cursor = &next
	}
	return conn, nil
}

// Generate submits one image job (POST /api/generate).
func (r *mutationResolver) Generate(ctx context.Context, input models.GenerateRequest) (*models.JobView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	created, err := r.svc.Jobs().SubmitImages(ctx, id, []models.GenerateRequest{input})
	if err != nil {
		return nil, err
	}
	v := created[0].View()
	return &v, nil
}

// GenerateBatch submits up to 32 image jobs, all or nothing (POST /api/generate-batch).
func (r *mutationResolver) GenerateBatch(ctx context.Context, items []models.GenerateRequest) ([]models.JobView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	created, err := r.svc.Jobs().SubmitImages(ctx, id, items)
	if err != nil {
		return nil, err
	}
	out := make([]models.JobView, len(created))
	for i, j := range created {
		out[i] = j.View()
	}
	return out, nil
}

// ImageToTemplate submits an image-to-template job (POST /api/image-to-template).
func (r *mutationResolver) ImageToTemplate(ctx context.Context, input models.ImageToTemplateRequest) (*models.JobView, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	j, err := r.svc.Jobs().SubmitImageToTemplate(ctx, id, input)
	if err != nil {
		return nil, err
	}
	v := j.View()
	return &v, nil
}

// CdnURL is the result link, null until the job is done.
func (r *jobResolver) CdnURL(_ context.Context, v *models.JobView) (*string, error) {
	return optional(v.CDNURL), nil
}

// TemplateID is the template an image-to-template job created, null otherwise.
func (r *jobResolver) TemplateID(_ context.Context, v *models.JobView) (*string, error) {
	return optional(v.TemplateID), nil
}

// JobProgress streams one job: its current state first, then each change until it ends.
func (r *subscriptionResolver) JobProgress(ctx context.Context, jobID string) (<-chan *models.JobView, error) {
	return setup(ctx, r.Resolver, func() (<-chan *models.JobView, error) {
		id, err := r.caller(ctx)
		if err != nil {
			return nil, err
		}
		if err := r.holdSubscription(ctx); err != nil {
			return nil, err
		}
		return r.svc.Jobs().FollowJob(ctx, id, jobID)
	})
}

// Jobs streams every change of the jobs the caller may see.
func (r *subscriptionResolver) Jobs(ctx context.Context) (<-chan *models.JobView, error) {
	return setup(ctx, r.Resolver, func() (<-chan *models.JobView, error) {
		id, err := r.caller(ctx)
		if err != nil {
			return nil, err
		}
		if err := r.holdSubscription(ctx); err != nil {
			return nil, err
		}
		return r.svc.Jobs().FollowJobs(ctx, id)
	})
}

// deref returns the string or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Status is the job's status (models.JobStatus) as the schema's String.
func (r *jobResolver) Status(_ context.Context, v *models.JobView) (string, error) {
	return string(v.Status), nil
}
