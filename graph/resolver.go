package graph

import (
	"context"
	"studio/models"
)

// Resolver is the root of the resolvers: the core and the asynchronous side they call.
type Resolver struct {
	svc              *models.App // the core: every operation goes through its domain services
	maxSubscriptions int
	// setups bounds the subscriptions being set up at once (identity and current state read from the
	// database), so that thousands of clients reconnecting together queue here instead of piling up on
	// the database with a goroutine and a deep stack each.
	setups chan struct{}
}

// maxSetups is how many subscriptions are set up at once.
const maxSetups = 32

// setup runs the start of a subscription within the bound of concurrent setups.
func setup[T any](ctx context.Context, r *Resolver, start func() (<-chan T, error)) (<-chan T, error) {
	select {
	case r.setups <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-r.setups }()
	return start()
}

type (
	queryResolver         struct{ *Resolver }
	mutationResolver      struct{ *Resolver }
	subscriptionResolver  struct{ *Resolver }
	jobResolver           struct{ *Resolver }
	templateResolver      struct{ *Resolver }
	templatePatchResolver struct{ *Resolver }
	videoTaskResolver     struct{ *Resolver }
)

// Query returns the resolvers of queries.
func (r *Resolver) Query() QueryResolver { return &queryResolver{r} }

// Mutation returns the resolvers of mutations.
func (r *Resolver) Mutation() MutationResolver { return &mutationResolver{r} }

// Subscription returns the resolvers of subscriptions.
func (r *Resolver) Subscription() SubscriptionResolver { return &subscriptionResolver{r} }

// Job returns the resolvers of the Job fields that differ from the core's view.
func (r *Resolver) Job() JobResolver { return &jobResolver{r} }

// JobStep returns the resolvers of the JobStep fields that differ from the core's view.
func (r *Resolver) JobStep() JobStepResolver { return &jobStepResolver{r} }

type jobStepResolver struct{ *Resolver }

// Status is the step's status (models.StepStatus) as the schema's String.
func (r *jobStepResolver) Status(_ context.Context, v *models.Step) (string, error) {
	return string(v.Status), nil
}

// Template returns the resolvers of the Template fields that differ from the core's view.
func (r *Resolver) Template() TemplateResolver { return &templateResolver{r} }

// VideoTask returns the resolvers of the VideoTask fields that differ from the core's view.
func (r *Resolver) VideoTask() VideoTaskResolver { return &videoTaskResolver{r} }

// TemplatePatch returns the resolvers of TemplatePatch input fields.
func (r *Resolver) TemplatePatch() TemplatePatchResolver { return &templatePatchResolver{r} }

// Me answers who is calling.
func (r *queryResolver) Me(ctx context.Context) (*Identity, error) {
	id, err := r.caller(ctx)
	if err != nil {
		return nil, err
	}
	return &Identity{Kind: string(id.Kind), TenantID: optional(id.TenantID), AccountID: optional(id.AccountID),
		UserID: optional(id.UserID), Agent: optional(id.Agent)}, nil
}

// optional returns nil for an empty string, else a pointer to it.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
