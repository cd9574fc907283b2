package jobs

import "studio/models"

// Holder returns the service's models.Holder (inflight.go).
func (s *Service) Holder() models.Holder { return s.inflight }
