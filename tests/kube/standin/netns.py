"""Each node its own network namespace (cluster.py --node-netns).

One bridge on the host and, per node, a network namespace joined to it by a
veth pair. Inside a node's namespace: its own `lo` (127.0.0.1 is the node's
alone), its addresses on `eth0` (/32 and /128), and routes that send every
other address over the bridge: `127.0.0.0/8` and the default on-link (so ARP
finds the other nodes and, for its own local addresses, the host), IPv6 by
the bridge's link-local fe80::1 for the host's addresses and on-link for the
other nodes'. On the host: a /32 per node IPv4 address over the bridge (in the
`local` table, where it overrides `127.0.0.0/8 dev lo`, for 127.x), a /128 per
IPv6 one, with the API server's address as their source, so the host (the API
server, the tests, the kubelet's probes) reaches every node and every node
reaches the API server. Addresses in 127/8 leave `lo` only with
`route_localnet=1`, set on the bridge and on each node's `eth0`: per
interface, nothing host-wide (no forwarding: the bridge carries node to node).

Every name starts with a prefix made of the API server's address and port,
so a crashed run's leftovers are found and removed when a cluster starts on
the same address and port (which it then owns), with --node-netns or without
(its nodes' addresses would otherwise still be routed to a dead bridge), and
everything is removed at stop. Requires root and iproute2."""
import hashlib
import ipaddress
import subprocess

GATEWAY6 = "fe80::1"


class NetnsError(Exception):
    pass


def _ip(*args, check=True):
    p = subprocess.run(("ip",) + args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise NetnsError("ip %s: %s" % (" ".join(args), p.stderr.strip() or "exit %d" % p.returncode))
    return p.stdout


def _sysctl_in(ns, key, value):
    """A per-interface sysctl inside ns (`ip netns exec` makes /proc/sys/net the namespace's)."""
    _ip("netns", "exec", ns, "sysctl", "-qw", "%s=%s" % (key, value))


def prefix_for(api_addr, api_port):
    return "tfk" + hashlib.sha1(("%s:%d" % (api_addr, api_port)).encode()).hexdigest()[:6]


def remove(prefix):
    """Every link and namespace of this prefix (the routes go with the bridge). Never fails."""
    try:
        links = [l.split(":")[1].strip().split("@")[0] for l in _ip("-o", "link", "show", check=False).splitlines() if ":" in l]
        namespaces = [l.split()[0] for l in _ip("netns", "list", check=False).splitlines() if l.split()]
    except OSError:          # no iproute2: nothing of ours can exist either
        return
    mine = [l for l in links if l.startswith(prefix)]
    for l in sorted(mine, key=lambda l: l == prefix + "b"):      # the veths (taking their peers) first
        _ip("link", "del", l, check=False)
    for ns in namespaces:
        if ns.startswith(prefix + "-"):
            _ip("netns", "del", ns, check=False)


class NodeNetworks:
    def __init__(self, api_addr, api_port, nodes):
        """nodes: [(name, [address, ...])] as cluster.py's --node gives them."""
        try:
            host = ipaddress.ip_address(api_addr)
        except ValueError:
            raise NetnsError("--node-netns: --address %s is not an IP address" % api_addr)
        if host.version != 4 or host.is_unspecified:
            raise NetnsError("--node-netns: --address must be one IPv4 address (the nodes' way back to the host), got %s" % api_addr)
        self.host = api_addr
        self.prefix = prefix_for(api_addr, api_port)
        self.bridge = self.prefix + "b"
        self.nodes = []
        seen = {api_addr: "the API server"}
        for i, (name, addrs) in enumerate(nodes):
            parsed = []
            for a in addrs:
                try:
                    ip = ipaddress.ip_address(a)
                except ValueError:
                    raise NetnsError("--node %s: %s is not an IP address" % (name, a))
                if str(ip) in seen:
                    raise NetnsError("--node %s: %s is already %s's" % (name, ip, seen[str(ip)]))
                seen[str(ip)] = "node " + name
                parsed.append(ip)
            if not any(ip.version == 4 for ip in parsed):
                raise NetnsError("--node %s: --node-netns needs an IPv4 address on each node (its way to the API server at %s)" % (name, api_addr))
            self.nodes.append({"name": name, "ns": "%s-%s" % (self.prefix, name), "veth": "%sv%d" % (self.prefix, i), "addrs": parsed})

    def path(self, node):
        """The node's namespace as a file container.py joins (setns)."""
        for n in self.nodes:
            if n["name"] == node:
                return "/run/netns/" + n["ns"]
        return None

    def remove(self):
        remove(self.prefix)

    def start(self):
        self.remove()
        for n in self.nodes:
            for ip in n["addrs"]:
                if _ip("-o", "addr", "show", "to", str(ip)).strip():
                    raise NetnsError("--node %s: %s is assigned on the host; a node in its own network namespace needs it to itself"
                                     % (n["name"], ip))
        try:
            self._start()
        except Exception:
            self.remove()
            raise

    def _start(self):
        b = self.bridge
        _ip("link", "add", b, "type", "bridge")
        with open("/proc/sys/net/ipv4/conf/%s/route_localnet" % b, "w") as f:
            f.write("1")
        _ip("-6", "addr", "add", GATEWAY6 + "/64", "dev", b, "nodad")
        _ip("link", "set", b, "up")
        all6 = [ip for n in self.nodes for ip in n["addrs"] if ip.version == 6]
        for n in self.nodes:
            ns, v = n["ns"], n["veth"]
            v4 = [ip for ip in n["addrs"] if ip.version == 4]
            v6 = [ip for ip in n["addrs"] if ip.version == 6]
            _ip("netns", "add", ns)
            _ip("link", "add", v, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", v, "master", b, "up")
            _sysctl_in(ns, "net.ipv4.conf.eth0.route_localnet", 1)
            _sysctl_in(ns, "net.ipv6.conf.eth0.accept_dad", 0)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", "eth0", "up")
            for ip in n["addrs"]:
                if ip.version == 4:
                    _ip("-n", ns, "addr", "add", "%s/32" % ip, "dev", "eth0")
                    _ip("route", "add", "%s/32" % ip, "dev", b, "src", self.host, "table", "local" if ip.is_loopback else "main")
                else:
                    _ip("-n", ns, "addr", "add", "%s/128" % ip, "dev", "eth0", "nodad")
                    _ip("-6", "route", "add", "%s/128" % ip, "dev", b)
            # the node's lo keeps 127.0.0.1 only: the rest of 127/8 is the host's or another node's
            _ip("-n", ns, "route", "del", "local", "127.0.0.0/8", "dev", "lo", "table", "local")
            _ip("-n", ns, "route", "add", "127.0.0.0/8", "dev", "eth0", "src", str(v4[0]))
            _ip("-n", ns, "route", "add", "default", "dev", "eth0", "src", str(v4[0]))
            if v6:
                _ip("-n", ns, "-6", "route", "add", "default", "via", GATEWAY6, "dev", "eth0", "src", str(v6[0]))
                for ip in all6:
                    if ip not in v6:
                        _ip("-n", ns, "-6", "route", "add", "%s/128" % ip, "dev", "eth0")
