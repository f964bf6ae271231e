#!/bin/sh
# Run by dpkg (prerm remove|purge) and rpm (%preun 0) before segfs is
# removed, not upgraded: stop and disable every segfs@ instance, so that
# no instance is left enabled, or serving, for a binary that is gone.
# Never fails: a removal must not be blocked by a unit that will not stop.
case "${1:-}" in
remove | purge | 0) ;;
*) exit 0 ;;
esac
running=
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	running=1
	for unit in $(systemctl list-units --all --plain --no-legend 'segfs@*' 2>/dev/null | awk '{print $1}'); do
		systemctl stop "$unit" || true
	done
fi
for link in /etc/systemd/system/*.wants/segfs@*.service; do
	[ -L "$link" ] || continue
	if [ -n "$running" ]; then
		systemctl disable "$(basename "$link")" >/dev/null 2>&1 || true
	fi
	rm -f "$link"
done
exit 0
