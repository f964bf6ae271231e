package mountinfo

import "testing"

func TestParseMountinfoLine(t *testing.T) {
	cases := []struct {
		line string
		want Entry
		ok   bool
	}{
		{
			line: `36 35 98:0 /mnt1 /mnt/with\040space rw,noatime master:1 - fuse.segfs s3://b/p ro,user_id=0`,
			want: Entry{Dev: "98:0", Dir: "/mnt/with space", FsType: "fuse.segfs", Source: "s3://b/p"},
			ok:   true,
		},
		{
			line: `22 1 0:21 / /proc rw,nosuid - proc proc rw`,
			want: Entry{Dev: "0:21", Dir: "/proc", FsType: "proc", Source: "proc"},
			ok:   true,
		},
		{
			line: `100 25 0:52 / /tmp/a\040b\134c rw,nosuid,nodev,relatime - fuse.segfs segfs rw,user_id=0,group_id=0`,
			want: Entry{Dev: "0:52", Dir: `/tmp/a b\c`, FsType: "fuse.segfs", Source: "segfs"},
			ok:   true,
		},
		{line: `garbage`, ok: false},
	}
	for _, c := range cases {
		got, ok := parseLine(c.line)
		if ok != c.ok || got != c.want {
			t.Errorf("parseLine(%q) = %+v, %v; want %+v, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}
