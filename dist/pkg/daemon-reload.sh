#!/bin/sh
# Run after segfs is installed, upgraded or removed: systemd reads its
# unit files again, when it runs.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || true
fi
exit 0
