// Site navigation: fills <nav id="app-nav"> and marks the current page for screen readers.
export const PAGES = [
  { path: "/", label: "Home" },
  { path: "/turnbased", label: "Chat" },
  { path: "/voice", label: "Live voice" },
  { path: "/duplex", label: "Duplex" },
  { path: "/omni", label: "Omni" },
  { path: "/admin", label: "Admin" },
  { path: "/sessions", label: "Recordings" },
];

export function renderNav(nav = document.getElementById("app-nav")) {
  if (!nav) return;
  nav.classList.add("app-nav");
  nav.setAttribute("aria-label", "Main");
  const path = location.pathname.replace(/\/+$/, "") || "/";
  const here = path.startsWith("/sessions/") ? "/sessions" : path; // a recording is under Recordings
  const list = document.createElement("ul");
  const brand = document.createElement("li");
  brand.className = "brand";
  brand.textContent = "omnivox";
  list.append(brand);
  for (const page of PAGES) {
    const item = document.createElement("li");
    const link = document.createElement("a");
    link.href = page.path;
    link.textContent = page.label;
    if (page.path === here) link.setAttribute("aria-current", "page");
    item.append(link);
    list.append(item);
  }
  nav.replaceChildren(list);
}
