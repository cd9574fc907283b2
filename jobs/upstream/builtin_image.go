package upstream

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	_ "image/gif" // decode GIF reference pictures
	"image/jpeg"
	"image/png"
	"math"
	"sort"
	"strconv"
	"strings"
)

// parseRatio reads "w:h"; anything unusable is 1:1.
func parseRatio(ratio string) (int, int) {
	a, b, ok := strings.Cut(strings.TrimSpace(ratio), ":")
	if !ok {
		return 1, 1
	}
	w, err1 := strconv.Atoi(strings.TrimSpace(a))
	h, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || w <= 0 || h <= 0 || w > 100 || h > 100 || w > 4*h || h > 4*w {
		return 1, 1
	}
	return w, h
}

// roundTo rounds v to the nearest multiple of m (at least m).
func roundTo(v float64, m int) int {
	n := int(math.Round(v/float64(m))) * m
	if n < m {
		n = m
	}
	return n
}

// fitLongSide returns the pixel size of ratio w:h whose long side is long, rounded to multiples of m.
func fitLongSide(w, h, long, m int) (int, int) {
	if w >= h {
		return long, roundTo(float64(long)*float64(h)/float64(w), m)
	}
	return roundTo(float64(long)*float64(w)/float64(h), m), long
}

// BuiltinImageSize returns the pixel size of builtin pictures: long side 1024 at 1k, 2048 at 2k and 4k.
func BuiltinImageSize(ratio, resolution string) (int, int) {
	long := 1024
	if r := strings.ToLower(resolution); r == "2k" || r == "4k" {
		long = 2048
	}
	w, h := parseRatio(ratio)
	return fitLongSide(w, h, long, 8)
}

// rng is a small deterministic generator (splitmix64).
type rng uint64

// next returns the next pseudo-random number.
func (r *rng) next() uint64 {
	*r += 0x9e3779b97f4a7c15
	z := uint64(*r)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float returns a number in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// colour returns a saturated random colour.
func (r *rng) colour() color.NRGBA {
	return hsv(r.float()*360, 0.45+0.5*r.float(), 0.55+0.45*r.float())
}

// hsv converts hue (degrees), saturation and value to a colour.
func hsv(h, s, v float64) color.NRGBA {
	c := v * s
	x := c * (1 - math.Abs(math.Mod(h/60, 2)-1))
	m := v - c
	var r, g, b float64
	switch {
	case h < 60:
		r, g, b = c, x, 0
	case h < 120:
		r, g, b = x, c, 0
	case h < 180:
		r, g, b = 0, c, x
	case h < 240:
		r, g, b = 0, x, c
	case h < 300:
		r, g, b = x, 0, c
	default:
		r, g, b = c, 0, x
	}
	return color.NRGBA{uint8((r + m) * 255), uint8((g + m) * 255), uint8((b + m) * 255), 255}
}

// seedOf hashes the parts that decide a picture.
func seedOf(parts ...[]byte) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	return h.Sum64()
}

// renderImage draws the deterministic picture of a request.
func renderImage(r ImageRequest) (*Image, error) {
	w, h := BuiltinImageSize(r.Ratio, r.Resolution)
	transparent := r.Background == "transparent"
	parts := [][]byte{[]byte(r.Prompt), []byte(r.Ratio), []byte(r.Resolution), []byte(r.Quality), []byte(r.Background), r.Image, r.Mask}
	parts = append(parts, r.ReferenceImages...)
	seed := rng(seedOf(parts...))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	paint(img, &seed, transparent)
	refs := r.ReferenceImages
	if len(r.Image) > 0 {
		refs = append([][]byte{r.Image}, refs...)
	}
	blendReferences(img, refs, transparent)
	var buf bytes.Buffer
	if transparent {
		enc := png.Encoder{CompressionLevel: png.BestSpeed}
		if err := enc.Encode(&buf, img); err != nil {
			return nil, err
		}
		return &Image{Data: buf.Bytes(), MIME: "image/png"}, nil
	}
	q := 90
	switch r.Quality {
	case "low":
		q = 60
	case "medium":
		q = 78
	}
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: q}); err != nil {
		return nil, err
	}
	return &Image{Data: buf.Bytes(), MIME: "image/jpeg"}, nil
}

// paint fills img with a gradient background (none when transparent) and a few soft discs.
func paint(img *image.NRGBA, r *rng, transparent bool) {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	c1, c2 := r.colour(), r.colour()
	if !transparent {
		for y := 0; y < h; y++ {
			row := img.Pix[y*img.Stride : y*img.Stride+w*4]
			for x := 0; x < w; x++ {
				t := (float64(x)/float64(w) + float64(y)/float64(h)) / 2
				row[x*4+0] = lerp(c1.R, c2.R, t)
				row[x*4+1] = lerp(c1.G, c2.G, t)
				row[x*4+2] = lerp(c1.B, c2.B, t)
				row[x*4+3] = 255
			}
		}
	}
	n := 3 + int(r.next()%4)
	short := float64(min(w, h))
	for i := 0; i < n; i++ {
		c := r.colour()
		cx, cy := r.float()*float64(w), r.float()*float64(h)
		rad := short * (0.12 + 0.25*r.float())
		x0, x1 := max(0, int(cx-rad)), min(w, int(cx+rad)+1)
		y0, y1 := max(0, int(cy-rad)), min(h, int(cy+rad)+1)
		for y := y0; y < y1; y++ {
			dy := float64(y) - cy
			row := img.Pix[y*img.Stride:]
			for x := x0; x < x1; x++ {
				dx := float64(x) - cx
				d := math.Sqrt(dx*dx+dy*dy) / rad
				if d >= 1 {
					continue
				}
				a := 0.85
				if d > 0.9 {
					a *= (1 - d) * 10 // soft edge
				}
				p := row[x*4 : x*4+4]
				if transparent && p[3] == 0 {
					p[0], p[1], p[2], p[3] = c.R, c.G, c.B, uint8(a*255)
					continue
				}
				p[0] = lerp(p[0], c.R, a)
				p[1] = lerp(p[1], c.G, a)
				p[2] = lerp(p[2], c.B, a)
				if transparent {
					p[3] = uint8(math.Max(float64(p[3]), a*255))
				}
			}
		}
	}
}

// lerp mixes two channel values.
func lerp(a, b uint8, t float64) uint8 {
	return uint8(float64(a)*(1-t) + float64(b)*t + 0.5)
}

// blendReferences mixes the decodable reference pictures into img at 40% (only into painted pixels
// when the background is transparent); undecodable references are skipped.
func blendReferences(img *image.NRGBA, refs [][]byte, transparent bool) {
	var grids []*image.NRGBA
	for _, data := range refs {
		src, _, err := image.Decode(bytes.NewReader(data))
		if err != nil {
			continue
		}
		grids = append(grids, thumbnail(src, 256))
	}
	if len(grids) == 0 {
		return
	}
	w, h := img.Rect.Dx(), img.Rect.Dy()
	for y := 0; y < h; y++ {
		row := img.Pix[y*img.Stride:]
		for x := 0; x < w; x++ {
			p := row[x*4 : x*4+4]
			if transparent && p[3] == 0 {
				continue
			}
			var sr, sg, sb int
			for _, g := range grids {
				gx := x * g.Rect.Dx() / w
				gy := y * g.Rect.Dy() / h
				q := g.Pix[gy*g.Stride+gx*4:]
				sr += int(q[0])
				sg += int(q[1])
				sb += int(q[2])
			}
			n := len(grids)
			p[0] = lerp(p[0], uint8(sr/n), 0.4)
			p[1] = lerp(p[1], uint8(sg/n), 0.4)
			p[2] = lerp(p[2], uint8(sb/n), 0.4)
		}
	}
}

// thumbnail samples src into an NRGBA picture whose long side is at most long pixels.
func thumbnail(src image.Image, long int) *image.NRGBA {
	b := src.Bounds()
	sw, sh := max(b.Dx(), 1), max(b.Dy(), 1)
	tw, th := sw, sh
	if sw > long || sh > long {
		tw, th = fitLongSide(sw, sh, long, 1)
	}
	out := image.NewNRGBA(image.Rect(0, 0, tw, th))
	for y := 0; y < th; y++ {
		for x := 0; x < tw; x++ {
			c := color.NRGBAModel.Convert(src.At(b.Min.X+x*sw/tw, b.Min.Y+y*sh/th)).(color.NRGBA)
			i := y*out.Stride + x*4
			out.Pix[i], out.Pix[i+1], out.Pix[i+2], out.Pix[i+3] = c.R, c.G, c.B, c.A
		}
	}
	return out
}

// namedColour is a colour word used in image descriptions.
type namedColour struct {
	name, zh string
	c        color.NRGBA
}

var colourNames = []namedColour{
	{"black", "黑色", color.NRGBA{20, 20, 20, 255}},
	{"white", "白色", color.NRGBA{240, 240, 240, 255}},
	{"gray", "灰色", color.NRGBA{128, 128, 128, 255}},
	{"red", "红色", color.NRGBA{200, 40, 40, 255}},
	{"orange", "橙色", color.NRGBA{235, 140, 40, 255}},
	{"yellow", "黄色", color.NRGBA{235, 215, 60, 255}},
	{"green", "绿色", color.NRGBA{60, 170, 70, 255}},
	{"cyan", "青色", color.NRGBA{60, 190, 200, 255}},
	{"blue", "蓝色", color.NRGBA{50, 90, 210, 255}},
	{"purple", "紫色", color.NRGBA{130, 70, 190, 255}},
	{"pink", "粉色", color.NRGBA{235, 130, 180, 255}},
	{"brown", "棕色", color.NRGBA{120, 80, 45, 255}},
}

// nearestName returns the colour word closest to c.
func nearestName(c color.NRGBA) namedColour {
	best, bestD := colourNames[0], math.MaxFloat64
	for _, n := range colourNames {
		dr, dg, db := float64(c.R)-float64(n.c.R), float64(c.G)-float64(n.c.G), float64(c.B)-float64(n.c.B)
		if d := dr*dr + dg*dg + db*db; d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// analysis is what the builtin image reader measures in a picture.
type analysis struct {
	Width, Height int
	Ratio         string
	Colours       []namedColour
	Hex           []string
	Brightness    float64 // 0..1
	Transparent   bool
}

// commonRatios are the ratios a picture is snapped to.
var commonRatios = []string{"1:1", "3:4", "4:3", "2:3", "3:2", "9:16", "16:9", "4:5", "5:4", "21:9"}

// nearestRatio returns the common ratio closest to w:h.
func nearestRatio(w, h int) string {
	r := float64(w) / float64(h)
	best, bestD := "1:1", math.MaxFloat64
	for _, s := range commonRatios {
		a, b := parseRatio(s)
		if s == "21:9" {
			a, b = 21, 9
		}
		if d := math.Abs(math.Log(r / (float64(a) / float64(b)))); d < bestD {
			best, bestD = s, d
		}
	}
	return best
}

// analyse decodes a picture and measures its size, dominant colours and brightness.
func analyse(data []byte) (*analysis, error) {
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		// WebP has no decoder in the standard library: read its size and describe it neutrally.
		if w, h, ok := webpSize(data); ok {
			return &analysis{Width: w, Height: h, Ratio: nearestRatio(w, h), Brightness: 0.5,
				Colours: []namedColour{colourNames[2]}, Hex: []string{"#808080"}}, nil
		}
		return nil, fmt.Errorf("decode image: %w", err)
	}
	b := src.Bounds()
	a := &analysis{Width: b.Dx(), Height: b.Dy()}
	if a.Width == 0 || a.Height == 0 {
		return nil, fmt.Errorf("decode image: empty picture")
	}
	a.Ratio = nearestRatio(a.Width, a.Height)
	g := thumbnail(src, 64)
	type bin struct {
		n       int
		r, g, b int
	}
	bins := map[int]*bin{}
	var lum float64
	var count int
	for i := 0; i+3 < len(g.Pix); i += 4 {
		p := g.Pix[i : i+4]
		if p[3] < 128 {
			a.Transparent = true
			continue
		}
		key := int(p[0]>>6)<<4 | int(p[1]>>6)<<2 | int(p[2]>>6)
		bn := bins[key]
		if bn == nil {
			bn = &bin{}
			bins[key] = bn
		}
		bn.n++
		bn.r += int(p[0])
		bn.g += int(p[1])
		bn.b += int(p[2])
		lum += (0.299*float64(p[0]) + 0.587*float64(p[1]) + 0.114*float64(p[2])) / 255
		count++
	}
	if count > 0 {
		a.Brightness = lum / float64(count)
	}
	list := make([]*bin, 0, len(bins))
	for _, bn := range bins {
		list = append(list, bn)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].n != list[j].n {
			return list[i].n > list[j].n
		}
		return list[i].r+list[i].g*256+list[i].b*65536 < list[j].r+list[j].g*256+list[j].b*65536
	})
	seen := map[string]bool{}
	for _, bn := range list {
		c := color.NRGBA{uint8(bn.r / bn.n), uint8(bn.g / bn.n), uint8(bn.b / bn.n), 255}
		n := nearestName(c)
		if seen[n.name] {
			continue
		}
		seen[n.name] = true
		a.Colours = append(a.Colours, n)
		a.Hex = append(a.Hex, fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B))
		if len(a.Colours) == 3 {
			break
		}
	}
	if len(a.Colours) == 0 {
		a.Colours = []namedColour{colourNames[1]}
		a.Hex = []string{"#ffffff"}
	}
	return a, nil
}

// webpSize reads the canvas size from a WebP header (lossy, lossless or extended).
func webpSize(d []byte) (int, int, bool) {
	if len(d) < 30 || string(d[0:4]) != "RIFF" || string(d[8:12]) != "WEBP" {
		return 0, 0, false
	}
	var w, h int
	switch string(d[12:16]) {
	case "VP8 ":
		if d[23] != 0x9d || d[24] != 0x01 || d[25] != 0x2a {
			return 0, 0, false
		}
		w = int(binary.LittleEndian.Uint16(d[26:28]) & 0x3fff)
		h = int(binary.LittleEndian.Uint16(d[28:30]) & 0x3fff)
	case "VP8L":
		if d[20] != 0x2f {
			return 0, 0, false
		}
		bits := binary.LittleEndian.Uint32(d[21:25])
		w = int(bits&0x3fff) + 1
		h = int(bits>>14&0x3fff) + 1
	case "VP8X":
		w = int(uint32(d[24])|uint32(d[25])<<8|uint32(d[26])<<16) + 1
		h = int(uint32(d[27])|uint32(d[28])<<8|uint32(d[29])<<16) + 1
	default:
		return 0, 0, false
	}
	return w, h, w > 0 && h > 0
}
