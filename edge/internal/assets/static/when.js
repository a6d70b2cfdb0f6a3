  // Times as the chat window and the inbox both say them (assets.go puts this file where
  // /*@when.js*/ stands in chat.js and in app.js): a heading over each day's messages
  // ("Today", "Yesterday", "Fri 4 Dec"), and each message's time: "just now", "5 min ago",
  // then the hour. word(key, vars) gives the page's words for today, yesterday, justNow and
  // minAgo ({n}).
  function whenDay(d, lang, word) {
    var today = new Date(), y = new Date(); y.setDate(today.getDate() - 1);
    if (d.toDateString() === today.toDateString()) return word('today');
    if (d.toDateString() === y.toDateString()) return word('yesterday');
    return d.toLocaleDateString(lang, { weekday: 'short', day: 'numeric', month: 'short', year: d.getFullYear() === today.getFullYear() ? undefined : 'numeric' });
  }
  function whenAgo(ms, lang, word) {
    var s = (Date.now() - ms) / 1000;
    if (s < 60) return word('justNow');
    if (s < 3600) return word('minAgo', { n: Math.floor(s / 60) });
    return new Date(ms).toLocaleTimeString(lang, { hour: '2-digit', minute: '2-digit' });
  }
